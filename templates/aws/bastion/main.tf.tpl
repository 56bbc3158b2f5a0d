{{- /* A Bastion is an EC2 instance with a public IP in one of the shoot's public subnets,
as Gardener's AWS extension runs it: its user data sets up the SSH keys, and its own
security group lets SSH in from the ingress blocks only (their `except` is ignored, as
Gardener's extension ignores it) and out only to the nodes. A Bastion does not carry the
shoot's infrastructure status, so providerConfig names the VPC, the subnet and the
image. */ -}}
{{- $config := dig "providerConfig" dict .object.spec -}}
{{- $region := dig "region" "" $config | default (dig "spec" "region" "" .cluster.shoot) -}}
{{- if not $region -}}
{{- invalid "providerConfig.region" "" "the Cluster names no shoot region: name the region here" -}}
{{- end -}}
{{- $cidrs := list -}}
{{- range .object.spec.ingress }}{{ $cidrs = append $cidrs .ipBlock.cidr }}{{ end -}}
{{- $ipFamilies := dig "spec" "networking" "ipFamilies" list .cluster.shoot -}}
{{ template "aws.kindProvider" (dict "root" . "region" (tfvar "region" $region) "services" (list "ec2")) }}

locals {
  # Gardener's names: the shoot's namespace (its technical ID) and the Bastion's name.
  name = format("%s-%s", {{ tfvar "cluster_name" .object.metadata.namespace }}, {{ tfvar "bastion_name" .object.metadata.name }})
  # AWS keeps a block in its canonical form (2001:db8::/32 for 2001:0DB8::/32), which
  # cidrsubnet writes: a block written otherwise would show as a change on every run.
  ingress_ipv4 = [for cidr in {{ tfvar "ingress_cidrs" $cidrs }} : cidrsubnet(cidr, 0, 0) if !strcontains(cidr, ":")]
  ingress_ipv6 = [for cidr in var.ingress_cidrs : cidrsubnet(cidr, 0, 0) if strcontains(cidr, ":")]
}
{{- if not (hasKey $config "workerSecurityGroupID") }}

data "aws_vpc" "vpc" {
  id = var.vpc_id
}
{{- end }}

resource "aws_security_group" "bastion" {
  name        = "${local.name}-bsg"
  description = "Bastion security group"
  vpc_id      = {{ tfvar "vpc_id" $config.vpcID }}
  tags        = { Name = "${local.name}-bsg" }

  ingress {
    description      = "SSH from the ingress blocks"
    from_port        = 22
    to_port          = 22
    protocol         = "tcp"
    cidr_blocks      = local.ingress_ipv4
    ipv6_cidr_blocks = local.ingress_ipv6
  }

  egress {
    description = "SSH to the nodes"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
{{- if hasKey $config "workerSecurityGroupID" }}
    security_groups = [var.worker_security_group_id]
{{- else }}
    cidr_blocks = [data.aws_vpc.vpc.cidr_block]
{{- end }}
  }
}
{{- if hasKey $config "workerSecurityGroupID" }}

# The nodes' security group lets SSH in from the bastion, as Gardener's extension lets it;
# the rule goes with the bastion.
resource "aws_security_group_rule" "nodes_ssh_from_bastion" {
  type                     = "ingress"
  description              = "SSH from the bastion ${local.name}"
  from_port                = 22
  to_port                  = 22
  protocol                 = "tcp"
  security_group_id        = {{ tfvar "worker_security_group_id" $config.workerSecurityGroupID }}
  source_security_group_id = aws_security_group.bastion.id
}
{{- end }}

resource "aws_instance" "bastion" {
  ami                         = {{ tfvar "image_id" $config.imageID }}
  instance_type               = {{ tfvar "instance_type" (dig "instanceType" "t3.nano" $config) }}
  subnet_id                   = {{ tfvar "subnet_id" $config.subnetID }}
  vpc_security_group_ids      = [aws_security_group.bastion.id]
  associate_public_ip_address = true
  user_data_base64            = {{ tfvar "user_data" .object.spec.userData }}
{{- if has "IPv6" $ipFamilies }}
  ipv6_address_count          = 1
{{- end }}
  tags                        = { Name = "${local.name}-bastion" }
}
