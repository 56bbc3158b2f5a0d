{{- /* A DNS record that holds nothing but its name and values, and fails, when
providerConfig.throttle is set, with that message, as a DNS service fails the calls of an
account over its API rate. */ -}}
{{- $config := dig "providerConfig" dict .object.spec -}}
resource "terraform_data" "record" {
  input = {
    name   = {{ tfvar "record_name" .object.spec.name }}
    values = {{ tfvar "record_values" .object.spec.values }}
    token  = sha256({{ .credentials.token }})
  }
}
{{ if hasKey $config "throttle" }}
resource "terraform_data" "throttled" {
  lifecycle {
    precondition {
      condition     = {{ tfvar "throttle" $config.throttle }} == ""
      error_message = {{ tfvar "throttle" $config.throttle }}
    }
  }
}
{{ end }}
output "zone" {
  value = "example.com"
}
