resource "terraform_data" "step" {
  count = {{ tfvar "steps" .infrastructure.providerConfig.steps }}
  input = {
    index = count.index
    token = sha256({{ .credentials.token }})
  }
  provisioner "local-exec" {
    command = "sleep ${ {{ tfvar "seconds" .infrastructure.providerConfig.seconds }} }"
  }
}

output "steps" {
  value = length(terraform_data.step)
}
