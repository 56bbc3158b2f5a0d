# A new network replaces the network; a new label changes it in place; extra adds a
# resource, and so changes what a plan does beside a replacement.
resource "terraform_data" "network" {
  triggers_replace = {{ tfvar "network" .infrastructure.providerConfig.network }}
  input            = {{ tfvar "label" .infrastructure.providerConfig.label }}
}

{{- if hasKey .infrastructure.providerConfig "extra" }}
resource "terraform_data" "extra" {
  input = "extra"
}
{{- end }}

output "network" {
  value = terraform_data.network.triggers_replace
}

output "token_digest" {
  value     = sha256({{ .credentials.token }})
  sensitive = true
}
