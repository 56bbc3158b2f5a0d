{{- $spec := .object.spec -}}
resource "terraform_data" "record" {
  input = {
    name   = {{ tfvar "record_name" $spec.name }}
    type   = {{ tfvar "record_type" $spec.recordType }}
    values = {{ tfvar "record_values" $spec.values }}
    token  = sha256({{ .credentials.token }})
  }
}

# The zone: the record's own, else the one found before, else the name's parent domain.
output "zone" {
  value = {{ tfvar "zone" (dig "zone" (dig "zone" (regexReplaceAll "^[^.]*\\." $spec.name "") .object.status) $spec) }}
}
