{{- /* A SelfHostedShootExposure is, on AWS, a network load balancer in front of the
self-hosted shoot's control-plane nodes, as Gardener's design for self-hosted shoots has
it (GEP-36): a target group of type ip over the nodes' InternalIP addresses of the
shoot's first IP family (of the endpoints given, as gardenlet lists the healthy ones), a TCP listener on spec.port that
forwards to it, and the load balancer's DNS name in status.ingress. The load balancer
sits in the public utility subnets the shoot's aws Infrastructure (../main.tf.tpl) tags
for load balancers, in the same namespace; providerConfig may name the VPC and subnets
instead, or ask for an internal load balancer. The nodes' security group, found by the
name that Infrastructure gives it, lets the port in from the VPC: the target group does
not preserve client addresses, so the load balancer connects from its own. */ -}}
{{- $spec := .object.spec -}}
{{- $config := dig "providerConfig" dict $spec -}}
{{- $region := dig "region" "" $config | default (dig "spec" "region" "" .cluster.shoot) -}}
{{- if not $region -}}
{{- invalid "providerConfig.region" "" "the Cluster names no shoot region: name the region here" -}}
{{- end -}}
{{- /* A target group holds addresses of one family: the shoot's first IP family's. A
dual-stack or IPv6 shoot's load balancer answers on both families. */ -}}
{{- $ipFamilies := dig "spec" "networking" "ipFamilies" list .cluster.shoot -}}
{{- $ipv6 := eq (first $ipFamilies | default "IPv4") "IPv6" -}}
{{- $addresses := list -}}
{{- range $spec.endpoints -}}
{{- range .addresses -}}
{{- if and (eq .type "InternalIP") (eq (contains ":" .address) $ipv6) }}{{ $addresses = append $addresses .address }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $findNetwork := not (hasKey $config "subnetIDs") -}}
{{ template "aws.kindProvider" (dict "root" . "region" (tfvar "region" $region) "services" (list "ec2" "elbv2")) }}

locals {
  cluster_name = {{ tfvar "cluster_name" .object.metadata.namespace }}
  cluster_tag  = "kubernetes.io/cluster/${local.cluster_name}"
  # A load balancer's and a target group's names have at most 32 characters: a digest of
  # the shoot's namespace and the exposure's name keeps them apart.
  exposure_name = {{ tfvar "exposure_name" .object.metadata.name }}
  name          = "kapi-${substr(sha256("${local.cluster_name}/${local.exposure_name}"), 0, 27)}"
  port      = {{ tfvar "port" $spec.port }}
  addresses = toset({{ tfvar "addresses" $addresses }})
{{- if $findNetwork }}
  subnet_ids = data.aws_subnets.load_balancers.ids
  vpc_id     = data.aws_subnet.first.vpc_id
{{- else }}
  subnet_ids = {{ tfvar "subnet_ids" $config.subnetIDs }}
  vpc_id     = {{ tfvar "vpc_id" $config.vpcID }}
{{- end }}
  tags = { (local.cluster_tag) = "1" }
}
{{- if $findNetwork }}

# The subnets the shoot's Infrastructure tags for its load balancers.
data "aws_subnets" "load_balancers" {
  filter {
    name   = "tag:${local.cluster_tag}"
    values = ["1"]
  }
  filter {
    name   = "tag:kubernetes.io/role/elb"
    values = ["use"]
  }
}

data "aws_subnet" "first" {
  id = sort(data.aws_subnets.load_balancers.ids)[0]

  lifecycle {
    precondition {
      condition     = length(data.aws_subnets.load_balancers.ids) > 0
      error_message = "The load balancer runs in the subnets tagged ${local.cluster_tag}=1 and kubernetes.io/role/elb=use by the shoot's aws Infrastructure; none are. Name the VPC and subnets in the providerConfig (vpcID, subnetIDs) otherwise."
    }
  }
}
{{- end }}

data "aws_vpc" "vpc" {
  id = local.vpc_id
}

data "aws_security_groups" "nodes" {
  filter {
    name   = "group-name"
    values = ["${local.cluster_name}-nodes"]
  }
  filter {
    name   = "vpc-id"
    values = [local.vpc_id]
  }
}

resource "aws_lb" "exposure" {
  name               = local.name
  load_balancer_type = "network"
  internal           = {{ tfvar "internal" (dig "internal" false $config) }}
  ip_address_type    = "{{ if has "IPv6" $ipFamilies }}dualstack{{ else }}ipv4{{ end }}"
  subnets            = local.subnet_ids
  tags               = merge(local.tags, { Name = "${local.cluster_name}-kube-apiserver" })
}

resource "aws_lb_target_group" "exposure" {
  name               = local.name
  port               = local.port
  protocol           = "TCP"
  target_type        = "ip"
  ip_address_type    = "{{ if $ipv6 }}ipv6{{ else }}ipv4{{ end }}"
  vpc_id             = local.vpc_id
  preserve_client_ip = "false"
  tags               = merge(local.tags, { Name = "${local.cluster_name}-kube-apiserver" })

  health_check {
    protocol = "TCP"
    port     = "traffic-port"
  }
}

resource "aws_lb_target_group_attachment" "endpoint" {
  for_each         = local.addresses
  target_group_arn = aws_lb_target_group.exposure.arn
  target_id        = each.value
  port             = local.port
}

resource "aws_lb_listener" "exposure" {
  load_balancer_arn = aws_lb.exposure.arn
  port              = local.port
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.exposure.arn
  }
}

# The nodes' group lets the API server's port in from the VPC, where the load balancer's
# addresses are; the rule goes with the exposure.
resource "aws_security_group_rule" "nodes_from_load_balancer" {
  type              = "ingress"
  description       = "kube-apiserver from the load balancer ${local.name}"
  from_port         = local.port
  to_port           = local.port
  protocol          = "tcp"
{{- if $ipv6 }}
  ipv6_cidr_blocks  = [data.aws_vpc.vpc.ipv6_cidr_block]
{{- else }}
  cidr_blocks       = [data.aws_vpc.vpc.cidr_block]
{{- end }}
  security_group_id = one(data.aws_security_groups.nodes.ids)

  lifecycle {
    precondition {
      condition     = length(data.aws_security_groups.nodes.ids) == 1
      error_message = "The load balancer reaches the nodes through their security group, named ${local.cluster_name}-nodes by the shoot's aws Infrastructure, which VPC ${local.vpc_id} lacks."
    }
  }
}
