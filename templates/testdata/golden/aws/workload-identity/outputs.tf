output "vpc_id" {
  value = local.vpc_id
}

output "subnets" {
  value = [
    { id = aws_subnet.nodes_z0.id, purpose = "nodes", zone = var.zone_0_name },
    { id = aws_subnet.public_utility_z0.id, purpose = "public", zone = var.zone_0_name },
    { id = aws_subnet.private_utility_z0.id, purpose = "private", zone = var.zone_0_name },
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
  value = aws_key_pair.nodes.key_name
}

# The shoot's nodes network when it has one, else the whole VPC (known only after apply
# when the VPC already exists).
output "nodes_cidr" {
  value = local.vpc_cidr
}

output "egress_cidrs" {
  value = [
    "${aws_nat_gateway.natgw_z0.public_ip}/32",
  ]
}
