{{- $config := .infrastructure.providerConfig -}}
{{- $networking := dig "spec" "networking" dict .cluster.shoot -}}
output "vpc_id" {
  value = local.vpc_id
}

output "subnets" {
  value = [
    {{- range $i, $zone := $config.networks.zones }}
    { id = aws_subnet.nodes_z{{ $i }}.id, purpose = "nodes", zone = var.zone_{{ $i }}_name },
    { id = aws_subnet.public_utility_z{{ $i }}.id, purpose = "public", zone = var.zone_{{ $i }}_name },
    { id = aws_subnet.private_utility_z{{ $i }}.id, purpose = "private", zone = var.zone_{{ $i }}_name },
    {{- end }}
  ]
}

output "security_groups" {
  value = [{ id = aws_security_group.nodes.id, purpose = "nodes" }]
}

output "instance_profiles" {
  value = [{ name = aws_iam_instance_profile.nodes.name, purpose = "nodes" }]
}

output "roles" {
  value = [{ arn = aws_iam_role.nodes.arn, purpose = "nodes" }]
}

output "key_name" {
  value = {{ if .infrastructure.sshPublicKey }}aws_key_pair.nodes.key_name{{ else }}""{{ end }}
}

# The shoot's nodes network when it has one, else the whole VPC (known only after apply
# when the VPC already exists).
output "nodes_cidr" {
  value = {{ if hasKey $networking "nodes" }}{{ tfvar "nodes_cidr" $networking.nodes }}{{ else }}local.vpc_cidr{{ end }}
}

output "egress_cidrs" {
  value = [
    {{- range $i, $zone := $config.networks.zones }}
    "${aws_nat_gateway.natgw_z{{ $i }}.public_ip}/32",
    {{- end }}
  ]
}
