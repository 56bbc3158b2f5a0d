resource "terraform_data" "first" {
  input = sha256({{ .credentials.token }})
}

resource "terraform_data" "slow" {
  input = terraform_data.first.id
  provisioner "local-exec" {
    command = "sleep ${ {{ tfvar "seconds" .infrastructure.providerConfig.seconds }} }"
  }
}

output "first" {
  value = terraform_data.first.id
}

output "slow" {
  value = terraform_data.slow.id
}
