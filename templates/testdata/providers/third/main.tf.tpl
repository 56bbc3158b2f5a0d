resource "terraform_data" "network" {
  input = {
    name   = {{ tfvar "name" .infrastructure.name }}
    cidr   = {{ tfvar "cidr" .infrastructure.providerConfig.cidr }}
    labels = {{ tfvar "labels" (dig "labels" dict .infrastructure.providerConfig) }}
    token  = sha256({{ .credentials.token }})
  }
}

output "network_name" {
  value = terraform_data.network.output.name
}

output "cidr" {
  value = terraform_data.network.output.cidr
}
