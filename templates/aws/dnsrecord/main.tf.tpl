{{- /* A DNSRecord is one Route 53 record set, upserted as Gardener's AWS extension does
(allow_overwrite), in the hosted zone of spec.zone, else the one found before
(status.zone), else the public zone of the account whose name is the longest suffix of
the record's name. Unlike Gardener's extension, a CNAME to an AWS load balancer stays a
CNAME instead of becoming an alias record. */ -}}
{{- $spec := .object.spec -}}
{{- $zone := "" -}}
{{- if dig "zone" "" $spec }}{{ $zone = $spec.zone }}{{ else if dig "zone" "" .object.status }}{{ $zone = .object.status.zone }}{{ end -}}
{{ template "aws.kindProvider" (dict "root" . "region" (tfvar "region" (dig "region" "" $spec | default "us-east-1")) "services" (list "route53")) }}

locals {
  # Route 53 keeps names in lower case, without the root's dot.
  record_name = trimsuffix(lower({{ tfvar "record_name" $spec.name }}), ".")
}
{{- if $zone }}

locals {
  zone_id = {{ tfvar "zone_id" $zone }}
}
{{- else }}

# Reads every hosted zone of the account once: the zone found becomes status.zone, which
# the next runs use instead.
data "aws_route53_zones" "all" {}

data "aws_route53_zone" "all" {
  for_each = toset(data.aws_route53_zones.all.ids)
  zone_id  = each.value
}

locals {
  zone_names = {
    for id, zone in data.aws_route53_zone.all : id => trimsuffix(lower(zone.name), ".") if !zone.private_zone
  }
  suffix_lengths = {
    for id, name in local.zone_names : id => length(name)
    if local.record_name == name || endswith(local.record_name, ".${name}")
  }
  longest = max(0, values(local.suffix_lengths)...)
  zone_id = try(sort([for id, n in local.suffix_lengths : id if n == local.longest])[0], null)
}
{{- end }}

resource "aws_route53_record" "record" {
  zone_id         = local.zone_id
  name            = local.record_name
  type            = {{ tfvar "record_type" $spec.recordType }}
  ttl             = {{ tfvar "ttl" (dig "ttl" 120 $spec) }}
  records         = {{ tfvar "record_values" $spec.values }}
  allow_overwrite = true

  lifecycle {
    precondition {
      condition     = local.zone_id != null
      error_message = "No public hosted zone of the account holds the record's name: create one, or name the zone in spec.zone."
    }
  }
}
