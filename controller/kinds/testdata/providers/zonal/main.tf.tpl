# One resource per zone; its id is new whenever terraform creates it.
resource "terraform_data" "zone" {
  count = {{ tfvar "zones" .infrastructure.providerConfig.zones }}
  input = {
    index = count.index
    token = sha256({{ .credentials.token }})
  }
}

# Created again after the zones changed; fails while the quota is exceeded, leaving the
# zones created.
resource "terraform_data" "quota" {
  triggers_replace = terraform_data.zone[*].id
  input            = {{ tfvar "quota_exceeded" .infrastructure.providerConfig.quotaExceeded }}
  provisioner "local-exec" {
    command = self.input ? "echo 'Error: QuotaExceeded: zone quota exceeded' >&2; exit 1" : "true"
  }
}

output "zones" {
  value = terraform_data.zone[*].id
}
