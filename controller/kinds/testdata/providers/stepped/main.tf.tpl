{{- $config := .infrastructure.providerConfig }}
{{ range $i := until (int $config.steps) }}
resource "terraform_data" "step_{{ $i }}" {
  input = sha256({{ $.credentials.token }})
  provisioner "local-exec" {
    command = "sleep {{ int $config.seconds }}"
  }
}
{{ end }}

output "steps" {
  value = {{ int $config.steps }}
}
