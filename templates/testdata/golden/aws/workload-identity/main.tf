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
  region                      = var.region
  skip_credentials_validation = var.endpoint != ""
  skip_requesting_account_id  = var.endpoint != ""
  skip_metadata_api_check     = var.endpoint != ""

  dynamic "endpoints" {
    for_each = var.endpoint == "" ? [] : [var.endpoint]
    content {
      ec2 = endpoints.value
      iam = endpoints.value
      sts = endpoints.value
    }
  }

  assume_role_with_web_identity {
    role_arn                = var.role_arn
    web_identity_token_file = var.web_identity_token_file
  }
}

locals {
  cluster_name = var.cluster_name
  tags         = { "kubernetes.io/cluster/${local.cluster_name}" = "1" }
  vpc_id       = aws_vpc.vpc.id
  vpc_cidr     = aws_vpc.vpc.cidr_block
  igw_id       = aws_internet_gateway.igw.id
}

resource "aws_vpc" "vpc" {
  cidr_block           = var.vpc_cidr
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

# Zone 0: workers, public and internal subnets, a NAT gateway and the routes between them.
resource "aws_subnet" "nodes_z0" {
  vpc_id            = local.vpc_id
  cidr_block        = var.zone_0_workers
  availability_zone = var.zone_0_name
  tags              = merge(local.tags, { Name = "${local.cluster_name}-nodes-z0" })
}

resource "aws_subnet" "public_utility_z0" {
  vpc_id            = local.vpc_id
  cidr_block        = var.zone_0_public
  availability_zone = var.zone_0_name
  tags              = merge(local.tags, { Name = "${local.cluster_name}-public-utility-z0", "kubernetes.io/role/elb" = "use" })
}

resource "aws_subnet" "private_utility_z0" {
  vpc_id            = local.vpc_id
  cidr_block        = var.zone_0_internal
  availability_zone = var.zone_0_name
  tags              = merge(local.tags, { Name = "${local.cluster_name}-private-utility-z0", "kubernetes.io/role/internal-elb" = "use" })
}

resource "aws_security_group_rule" "nodes_tcp_internal_z0" {
  type              = "ingress"
  from_port         = 30000
  to_port           = 32767
  protocol          = "tcp"
  cidr_blocks       = [var.zone_0_internal]
  security_group_id = aws_security_group.nodes.id
}

resource "aws_security_group_rule" "nodes_udp_internal_z0" {
  type              = "ingress"
  from_port         = 30000
  to_port           = 32767
  protocol          = "udp"
  cidr_blocks       = [var.zone_0_internal]
  security_group_id = aws_security_group.nodes.id
}

resource "aws_security_group_rule" "nodes_tcp_public_z0" {
  type              = "ingress"
  from_port         = 30000
  to_port           = 32767
  protocol          = "tcp"
  cidr_blocks       = [var.zone_0_public]
  security_group_id = aws_security_group.nodes.id
}

resource "aws_security_group_rule" "nodes_udp_public_z0" {
  type              = "ingress"
  from_port         = 30000
  to_port           = 32767
  protocol          = "udp"
  cidr_blocks       = [var.zone_0_public]
  security_group_id = aws_security_group.nodes.id
}

resource "aws_eip" "eip_natgw_z0" {
  domain = "vpc"
  tags   = merge(local.tags, { Name = "${local.cluster_name}-eip-natgw-z0" })
}

resource "aws_nat_gateway" "natgw_z0" {
  allocation_id = aws_eip.eip_natgw_z0.id
  subnet_id     = aws_subnet.public_utility_z0.id
  tags          = merge(local.tags, { Name = "${local.cluster_name}-natgw-z0" })
}

resource "aws_route_table" "private_utility_z0" {
  vpc_id = local.vpc_id
  tags   = merge(local.tags, { Name = "${local.cluster_name}-private-z0" })
}

resource "aws_route" "private_utility_z0_nat" {
  route_table_id         = aws_route_table.private_utility_z0.id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.natgw_z0.id
}

resource "aws_route_table_association" "nodes_z0" {
  subnet_id      = aws_subnet.nodes_z0.id
  route_table_id = aws_route_table.private_utility_z0.id
}

resource "aws_route_table_association" "private_utility_z0" {
  subnet_id      = aws_subnet.private_utility_z0.id
  route_table_id = aws_route_table.private_utility_z0.id
}

resource "aws_route_table_association" "public_utility_z0" {
  subnet_id      = aws_subnet.public_utility_z0.id
  route_table_id = aws_route_table.public.id
}

moved {
  from = aws_route_table.routetable_private_utility_z0
  to   = aws_route_table.private_utility_z0
}

moved {
  from = aws_route_table_association.routetable_private_utility_z0_association_nodes_z0
  to   = aws_route_table_association.nodes_z0
}

moved {
  from = aws_route_table_association.routetable_private_utility_z0_association_private_utility_z0
  to   = aws_route_table_association.private_utility_z0
}

moved {
  from = aws_route_table_association.routetable_main_association_public_utility_z0
  to   = aws_route_table_association.public_utility_z0
}

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
      {
        Effect   = "Allow"
        Action   = ["ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:GetRepositoryPolicy", "ecr:DescribeRepositories", "ecr:ListImages", "ecr:BatchGetImage"]
        Resource = ["*"]
      },
    ]
  })
}

resource "aws_key_pair" "nodes" {
  key_name   = "${local.cluster_name}-ssh-publickey"
  public_key = var.ssh_public_key
  tags       = local.tags
}

moved {
  from = aws_key_pair.kubernetes
  to   = aws_key_pair.nodes
}
