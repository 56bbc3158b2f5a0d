resource "terraform_data" "item" {
  count = {{ tfvar "items" .infrastructure.providerConfig.items }}
  input = {
    index = count.index
    token = sha256({{ .credentials.token }})
  }
}

output "items" {
  value = length(terraform_data.item)
}
