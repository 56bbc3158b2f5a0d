{{- $config := .infrastructure.providerConfig -}}
{{- $vpc := $config.networks.vpc -}}
{{- $ignoreTags := dig "ignoreTags" dict $config -}}
terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "5.100.0"
    }
  }
}

# Static credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; a workload
# identity assumes its role with the token in a file, which the AWS SDK reads again each
# time it renews the role's credentials. An endpoint (LocalStack) replaces every service
# endpoint and skips the checks only real AWS can answer.
provider "aws" {
  region                      = {{ tfvar "region" .infrastructure.region }}
  skip_credentials_validation = {{ .credentials.endpoint }} != ""
  skip_requesting_account_id  = {{ .credentials.endpoint }} != ""
  skip_metadata_api_check     = {{ .credentials.endpoint }} != ""

  dynamic "endpoints" {
    for_each = {{ .credentials.endpoint }} == "" ? [] : [{{ .credentials.endpoint }}]
    content {
      ec2 = endpoints.value
      iam = endpoints.value
      sts = endpoints.value
    }
  }
{{- if .workloadIdentity }}

  assume_role_with_web_identity {
    role_arn                = {{ .credentials.config.roleARN }}
    web_identity_token_file = {{ .credentials.token }}
  }
{{- end }}
{{- if $ignoreTags }}

  ignore_tags {
    keys         = {{ tfvar "ignore_tags_keys" (dig "keys" list $ignoreTags) }}
    key_prefixes = {{ tfvar "ignore_tags_key_prefixes" (dig "keyPrefixes" list $ignoreTags) }}
  }
{{- end }}
}

locals {
  cluster_name = {{ tfvar "cluster_name" .infrastructure.namespace }}
  tags         = { "kubernetes.io/cluster/${local.cluster_name}" = "1" }
{{- if hasKey $vpc "id" }}
  vpc_id       = data.aws_vpc.vpc.id
  vpc_cidr     = data.aws_vpc.vpc.cidr_block
  igw_id       = data.aws_internet_gateway.igw.id
{{- else }}
  vpc_id       = aws_vpc.vpc.id
  vpc_cidr     = aws_vpc.vpc.cidr_block
  igw_id       = aws_internet_gateway.igw.id
{{- end }}
}
{{ if hasKey $vpc "id" }}
# An existing VPC: it and its internet gateway are looked up, never changed.
data "aws_vpc" "vpc" {
  id = {{ tfvar "vpc_id" $vpc.id }}
}

data "aws_internet_gateway" "igw" {
  filter {
    name   = "attachment.vpc-id"
    values = [var.vpc_id]
  }
}
{{- else }}
resource "aws_vpc" "vpc" {
  cidr_block           = {{ tfvar "vpc_cidr" $vpc.cidr }}
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(local.tags, { Name = local.cluster_name })
}

resource "aws_vpc_dhcp_options" "vpc_dhcp_options" {
  domain_name         = var.region == "us-east-1" ? "ec2.internal" : "${var.region}.compute.internal"
  domain_name_servers = ["AmazonProvidedDNS"]
  tags                = merge(local.tags, { Name = local.cluster_name })
}

resource "aws_vpc_dhcp_options_association" "vpc_dhcp_options_association" {
  vpc_id          = aws_vpc.vpc.id
  dhcp_options_id = aws_vpc_dhcp_options.vpc_dhcp_options.id
}

# Takes the VPC's default security group over, which removes its rules.
resource "aws_default_security_group" "default" {
  vpc_id = aws_vpc.vpc.id
}

resource "aws_internet_gateway" "igw" {
  vpc_id = aws_vpc.vpc.id
  tags   = merge(local.tags, { Name = local.cluster_name })
}
{{- end }}

# Gardener's terraform-era AWS template (charts/internal/aws-infra) named some resources
# differently: a state it wrote is taken over by these moves, and nothing is recreated.
moved {
  from = aws_route_table.routetable_main
  to   = aws_route_table.public
}

moved {
  from = aws_route.public
  to   = aws_route.public_default
}

moved {
  from = aws_security_group_rule.nodes_tcp_all
  to   = aws_security_group_rule.nodes_tcp_node_ports
}

moved {
  from = aws_security_group_rule.nodes_udp_all
  to   = aws_security_group_rule.nodes_udp_node_ports
}

moved {
  from = aws_security_group_rule.nodes_egress_all
  to   = aws_security_group_rule.nodes_egress
}

resource "aws_route_table" "public" {
  vpc_id = local.vpc_id
  tags   = merge(local.tags, { Name = local.cluster_name })
}

resource "aws_route" "public_default" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = local.igw_id
}

resource "aws_security_group" "nodes" {
  name = "${local.cluster_name}-nodes"
  # Gardener's description: it cannot change without replacing the group.
  description = "Security group for nodes"
  vpc_id      = local.vpc_id
  tags        = merge(local.tags, { Name = "${local.cluster_name}-nodes" })
}

resource "aws_security_group_rule" "nodes_self" {
  type              = "ingress"
  from_port         = 0
  to_port           = 0
  protocol          = "-1"
  self              = true
  security_group_id = aws_security_group.nodes.id
}

resource "aws_security_group_rule" "nodes_tcp_node_ports" {
  type              = "ingress"
  from_port         = 30000
  to_port           = 32767
  protocol          = "tcp"
  cidr_blocks       = ["0.0.0.0/0"]
  security_group_id = aws_security_group.nodes.id
}

resource "aws_security_group_rule" "nodes_udp_node_ports" {
  type              = "ingress"
  from_port         = 30000
  to_port           = 32767
  protocol          = "udp"
  cidr_blocks       = ["0.0.0.0/0"]
  security_group_id = aws_security_group.nodes.id
}

resource "aws_security_group_rule" "nodes_egress" {
  type              = "egress"
  from_port         = 0
  to_port           = 0
  protocol          = "-1"
  cidr_blocks       = ["0.0.0.0/0"]
  security_group_id = aws_security_group.nodes.id
}
{{ range $i, $zone := $config.networks.zones }}
# Zone {{ $i }}: workers, public and internal subnets, a NAT gateway and the routes between them.
resource "aws_subnet" "nodes_z{{ $i }}" {
  vpc_id            = local.vpc_id
  cidr_block        = {{ tfvar (printf "zone_%d_workers" $i) $zone.workers }}
  availability_zone = {{ tfvar (printf "zone_%d_name" $i) $zone.name }}
  tags              = merge(local.tags, { Name = "${local.cluster_name}-nodes-z{{ $i }}" })
}

resource "aws_subnet" "public_utility_z{{ $i }}" {
  vpc_id            = local.vpc_id
  cidr_block        = {{ tfvar (printf "zone_%d_public" $i) $zone.public }}
  availability_zone = var.zone_{{ $i }}_name
  tags              = merge(local.tags, { Name = "${local.cluster_name}-public-utility-z{{ $i }}", "kubernetes.io/role/elb" = "use" })
}

resource "aws_subnet" "private_utility_z{{ $i }}" {
  vpc_id            = local.vpc_id
  cidr_block        = {{ tfvar (printf "zone_%d_internal" $i) $zone.internal }}
  availability_zone = var.zone_{{ $i }}_name
  tags              = merge(local.tags, { Name = "${local.cluster_name}-private-utility-z{{ $i }}", "kubernetes.io/role/internal-elb" = "use" })
}

{{- range $subnet := list "internal" "public" }}
{{- range $protocol := list "tcp" "udp" }}

resource "aws_security_group_rule" "nodes_{{ $protocol }}_{{ $subnet }}_z{{ $i }}" {
  type              = "ingress"
  from_port         = 30000
  to_port           = 32767
  protocol          = "{{ $protocol }}"
  cidr_blocks       = [var.zone_{{ $i }}_{{ $subnet }}]
  security_group_id = aws_security_group.nodes.id
}
{{- end }}
{{- end }}
{{ if hasKey $zone "elasticIPAllocationID" }}
resource "aws_nat_gateway" "natgw_z{{ $i }}" {
  allocation_id = {{ tfvar (printf "zone_%d_elastic_ip_allocation_id" $i) $zone.elasticIPAllocationID }}
  subnet_id     = aws_subnet.public_utility_z{{ $i }}.id
  tags          = merge(local.tags, { Name = "${local.cluster_name}-natgw-z{{ $i }}" })
}
{{ else }}
resource "aws_eip" "eip_natgw_z{{ $i }}" {
  domain = "vpc"
  tags   = merge(local.tags, { Name = "${local.cluster_name}-eip-natgw-z{{ $i }}" })
}

resource "aws_nat_gateway" "natgw_z{{ $i }}" {
  allocation_id = aws_eip.eip_natgw_z{{ $i }}.id
  subnet_id     = aws_subnet.public_utility_z{{ $i }}.id
  tags          = merge(local.tags, { Name = "${local.cluster_name}-natgw-z{{ $i }}" })
}
{{ end }}
resource "aws_route_table" "private_utility_z{{ $i }}" {
  vpc_id = local.vpc_id
  tags   = merge(local.tags, { Name = "${local.cluster_name}-private-z{{ $i }}" })
}

resource "aws_route" "private_utility_z{{ $i }}_nat" {
  route_table_id         = aws_route_table.private_utility_z{{ $i }}.id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.natgw_z{{ $i }}.id
}

resource "aws_route_table_association" "nodes_z{{ $i }}" {
  subnet_id      = aws_subnet.nodes_z{{ $i }}.id
  route_table_id = aws_route_table.private_utility_z{{ $i }}.id
}

resource "aws_route_table_association" "private_utility_z{{ $i }}" {
  subnet_id      = aws_subnet.private_utility_z{{ $i }}.id
  route_table_id = aws_route_table.private_utility_z{{ $i }}.id
}

resource "aws_route_table_association" "public_utility_z{{ $i }}" {
  subnet_id      = aws_subnet.public_utility_z{{ $i }}.id
  route_table_id = aws_route_table.public.id
}

moved {
  from = aws_route_table.routetable_private_utility_z{{ $i }}
  to   = aws_route_table.private_utility_z{{ $i }}
}

moved {
  from = aws_route_table_association.routetable_private_utility_z{{ $i }}_association_nodes_z{{ $i }}
  to   = aws_route_table_association.nodes_z{{ $i }}
}

moved {
  from = aws_route_table_association.routetable_private_utility_z{{ $i }}_association_private_utility_z{{ $i }}
  to   = aws_route_table_association.private_utility_z{{ $i }}
}

moved {
  from = aws_route_table_association.routetable_main_association_public_utility_z{{ $i }}
  to   = aws_route_table_association.public_utility_z{{ $i }}
}
{{ end }}
resource "aws_iam_role" "nodes" {
  name = "${local.cluster_name}-nodes"
  path = "/"
  assume_role_policy = jsonencode({
    Version   = "2012-10-17"
    Statement = [{ Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" }]
  })
  tags = local.tags
}

resource "aws_iam_instance_profile" "nodes" {
  name = "${local.cluster_name}-nodes"
  role = aws_iam_role.nodes.name
}

resource "aws_iam_role_policy" "nodes" {
  name = "${local.cluster_name}-nodes"
  role = aws_iam_role.nodes.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      { Effect = "Allow", Action = ["ec2:DescribeInstances", "ec2:DescribeRegions"], Resource = ["*"] },
{{- if dig "enableECRAccess" true $config }}
      {
        Effect   = "Allow"
        Action   = ["ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:GetRepositoryPolicy", "ecr:DescribeRepositories", "ecr:ListImages", "ecr:BatchGetImage"]
        Resource = ["*"]
      },
{{- end }}
    ]
  })
}
{{ if .infrastructure.sshPublicKey }}
resource "aws_key_pair" "nodes" {
  key_name   = "${local.cluster_name}-ssh-publickey"
  public_key = {{ tfvar "ssh_public_key" (trim .infrastructure.sshPublicKey) }}
  tags       = local.tags
}

moved {
  from = aws_key_pair.kubernetes
  to   = aws_key_pair.nodes
}
{{- end }}
