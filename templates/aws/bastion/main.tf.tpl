{{- /* A Bastion is an EC2 instance with a public IP in the shoot's public subnet, as
Gardener's AWS extension runs it: its user data sets up the SSH keys, and its own security
group lets SSH in from the ingress blocks only (their `except` is ignored, as Gardener's
extension ignores it) and out only to the nodes, whose security group lets SSH in from it.
A Bastion as gardenlet creates it has no providerConfig: the subnet (the public utility
subnet of the first zone), its VPC and the nodes' security group are found by the names
and tags the aws Infrastructure (../main.tf.tpl) gives them, and the machine type and
image come from the Cluster's CloudProfile (spec.bastion, and the AMI per region and
architecture of its providerConfig). providerConfig overrides any of them. */ -}}
{{- $config := dig "providerConfig" dict .object.spec -}}
{{- $region := dig "region" "" $config | default (dig "spec" "region" "" .cluster.shoot) -}}
{{- if not $region -}}
{{- invalid "providerConfig.region" "" "the Cluster names no shoot region: name the region here" -}}
{{- end -}}
{{- $cidrs := list -}}
{{- range .object.spec.ingress }}{{ $cidrs = append $cidrs .ipBlock.cidr }}{{ end -}}
{{- $ipFamilies := dig "spec" "networking" "ipFamilies" list .cluster.shoot -}}
{{- /* The network: given (vpcID and subnetID, the schema wants both), or found. */ -}}
{{- $findNetwork := not (hasKey $config "subnetID") -}}
{{- /* The nodes' security group: given, found with the network, or none (the bastion
then reaches port 22 anywhere in the VPC given). */ -}}
{{- $nodesGroup := or (hasKey $config "workerSecurityGroupID") $findNetwork -}}
{{- $image := dict "id" (dig "imageID" "" $config) "instanceType" (dig "instanceType" "" $config) -}}
{{- if not $image.id -}}
{{- /* The CloudProfile's bastion image (Gardener's choice, see bastionMachine), by the
AMI its providerConfig (a CloudProfileConfig) gives the image's version in the region for
the machine's architecture. */ -}}
{{- $machine := bastionMachine .cluster.cloudProfile -}}
{{- range dig "spec" "providerConfig" "machineImages" list .cluster.cloudProfile -}}
{{- if and (kindIs "map" .) (eq (dig "name" "" .) $machine.image) -}}
{{- range dig "versions" list . -}}
{{- if and (kindIs "map" .) (eq (dig "version" "" .) $machine.version) -}}
{{- range dig "regions" list . -}}
{{- if and (kindIs "map" .) (eq (dig "name" "" .) $region) (eq (dig "architecture" "amd64" .) $machine.architecture) -}}
{{- $_ := set $image "id" (dig "ami" "" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $image.id -}}
{{- invalid "cluster.spec.cloudProfile.spec.providerConfig.machineImages" $machine.image (printf "the CloudProfileConfig gives image %s version %s no AMI in region %s for architecture %s (the bastion's machine type %s): add it, or name the image in the Bastion's providerConfig (imageID)" $machine.image $machine.version $region $machine.architecture $machine.machineType) -}}
{{- end -}}
{{- if not $image.instanceType }}{{ $_ := set $image "instanceType" $machine.machineType }}{{ end -}}
{{- end -}}
{{- if not $image.instanceType }}{{ $_ := set $image "instanceType" (dig "spec" "bastion" "machineType" "name" "t3.nano" .cluster.cloudProfile) }}{{ end -}}
{{ template "aws.kindProvider" (dict "root" . "region" (tfvar "region" $region) "services" (list "ec2")) }}

locals {
  # Gardener's names: the shoot's namespace (its technical ID) and the Bastion's name.
  name = format("%s-%s", {{ tfvar "cluster_name" .object.metadata.namespace }}, {{ tfvar "bastion_name" .object.metadata.name }})
  # AWS keeps a block in its canonical form (2001:db8::/32 for 2001:0DB8::/32), which
  # cidrsubnet writes: a block written otherwise would show as a change on every run.
  ingress_ipv4 = [for cidr in {{ tfvar "ingress_cidrs" $cidrs }} : cidrsubnet(cidr, 0, 0) if !strcontains(cidr, ":")]
  ingress_ipv6 = [for cidr in var.ingress_cidrs : cidrsubnet(cidr, 0, 0) if strcontains(cidr, ":")]
{{- if $findNetwork }}
  # The names and tag the aws Infrastructure gives the first zone's public subnet and the
  # nodes' security group.
  subnet_name      = "${var.cluster_name}-public-utility-z0"
  cluster_tag      = "kubernetes.io/cluster/${var.cluster_name}"
  nodes_group_name = "${var.cluster_name}-nodes"
  vpc_id           = data.aws_subnet.public_utility_z0.vpc_id
  subnet_id        = data.aws_subnet.public_utility_z0.id
{{- else }}
  vpc_id           = {{ tfvar "vpc_id" $config.vpcID }}
  subnet_id        = {{ tfvar "subnet_id" $config.subnetID }}
{{- end }}
{{- if hasKey $config "workerSecurityGroupID" }}
  nodes_group_id = {{ tfvar "worker_security_group_id" $config.workerSecurityGroupID }}
{{- else if $findNetwork }}
  # A VPC has one group of a name; a missing one fails the bastion group's precondition.
  nodes_group_id = one(data.aws_security_groups.nodes.ids)
{{- end }}
}
{{- if $findNetwork }}

# The shoot's network, found as its Infrastructure names and tags it: a precondition says
# what was looked for when it is not there (a shoot without an aws Infrastructure, or one
# whose first zone has no public subnet).
data "aws_subnets" "public_utility_z0" {
  filter {
    name   = "tag:Name"
    values = [local.subnet_name]
  }
  filter {
    name   = "tag:${local.cluster_tag}"
    values = ["1"]
  }
}

data "aws_subnet" "public_utility_z0" {
  id = one(data.aws_subnets.public_utility_z0.ids)

  lifecycle {
    precondition {
      condition     = length(data.aws_subnets.public_utility_z0.ids) == 1
      error_message = "The bastion runs in the shoot's public subnet of its first zone, the one subnet tagged Name=${local.subnet_name} and ${local.cluster_tag}=1 by the shoot's aws Infrastructure; ${length(data.aws_subnets.public_utility_z0.ids)} are tagged so. Name the VPC and subnet in the Bastion's providerConfig (vpcID, subnetID) otherwise."
    }
  }
}
{{- if not (hasKey $config "workerSecurityGroupID") }}

data "aws_security_groups" "nodes" {
  filter {
    name   = "group-name"
    values = [local.nodes_group_name]
  }
  filter {
    name   = "vpc-id"
    values = [local.vpc_id]
  }
}
{{- end }}
{{- end }}
{{- if not $nodesGroup }}

data "aws_vpc" "vpc" {
  id = local.vpc_id
}
{{- end }}

resource "aws_security_group" "bastion" {
  name        = "${local.name}-bsg"
  description = "Bastion security group"
  vpc_id      = local.vpc_id
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
{{- if $nodesGroup }}
    security_groups = [local.nodes_group_id]
{{- else }}
    cidr_blocks = [data.aws_vpc.vpc.cidr_block]
{{- end }}
  }
{{- if and $findNetwork (not (hasKey $config "workerSecurityGroupID")) }}

  lifecycle {
    precondition {
      condition     = length(data.aws_security_groups.nodes.ids) == 1
      error_message = "The bastion reaches the nodes through their security group, named ${local.nodes_group_name} by the shoot's aws Infrastructure, which VPC ${local.vpc_id} lacks. Name it in the Bastion's providerConfig (workerSecurityGroupID) otherwise."
    }
  }
{{- end }}
}
{{- if $nodesGroup }}

# The nodes' security group lets SSH in from the bastion, as Gardener's extension lets it;
# the rule goes with the bastion.
resource "aws_security_group_rule" "nodes_ssh_from_bastion" {
  type                     = "ingress"
  description              = "SSH from the bastion ${local.name}"
  from_port                = 22
  to_port                  = 22
  protocol                 = "tcp"
  security_group_id        = local.nodes_group_id
  source_security_group_id = aws_security_group.bastion.id
}
{{- end }}

resource "aws_instance" "bastion" {
  ami                         = {{ tfvar "image_id" $image.id }}
  instance_type               = {{ tfvar "instance_type" $image.instanceType }}
  subnet_id                   = local.subnet_id
  vpc_security_group_ids      = [aws_security_group.bastion.id]
  associate_public_ip_address = true
  user_data_base64            = {{ tfvar "user_data" .object.spec.userData }}
{{- if has "IPv6" $ipFamilies }}
  ipv6_address_count          = 1
{{- end }}
  tags                        = { Name = "${local.name}-bastion" }
}
