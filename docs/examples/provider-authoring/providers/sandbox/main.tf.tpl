resource "terraform_data" "network" {
  input = {
    name  = {{ tfvar "name" .infrastructure.name }}
    cidr  = {{ tfvar "cidr" .infrastructure.providerConfig.cidr }}
    token = sha256({{ .credentials.token }})
  }
}
{{ range $i, $zone := .infrastructure.providerConfig.zones }}
resource "terraform_data" "zone_{{ $i }}" {
  input = {
    network = terraform_data.network.output.name
    name    = {{ tfvar (printf "zone_%d_name" $i) $zone.name }}
    workers = {{ tfvar (printf "zone_%d_workers" $i) $zone.workers }}
  }
}
{{ end }}
output "network_name" {
  value = terraform_data.network.output.name
}

output "cidr" {
  value = terraform_data.network.output.cidr
}

output "zones" {
  value = [{{ range $i, $_ := .infrastructure.providerConfig.zones }}terraform_data.zone_{{ $i }}.output, {{ end }}]
}
