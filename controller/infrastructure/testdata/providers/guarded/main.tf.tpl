# A new network replaces the network; a new label changes it in place.
resource "terraform_data" "network" {
  triggers_replace = {{ tfvar "network" .infrastructure.providerConfig.network }}
  input            = {{ tfvar "label" .infrastructure.providerConfig.label }}
}

output "network" {
  value = terraform_data.network.triggers_replace
}

output "token_digest" {
  value     = sha256({{ .credentials.token }})
  sensitive = true
}
