{{- /* A DNSRecord is one Route 53 record set, upserted as Gardener's AWS extension does
(allow_overwrite), in the hosted zone of spec.zone, else the one found before
(status.zone), else the public zone of the account whose name is the longest suffix of
the record's name.

A CNAME whose target is an AWS load balancer (or another alias target Gardener's
extension knows: Global Accelerator, CloudFront, PrivateLink endpoints, API Gateway)
becomes an alias record instead, as Gardener's extension writes it: an alias A record,
an alias AAAA record for a shoot of IPv6 alone, or both for a dual-stack one, as the
DNSRecord's annotation dns.gardener.cloud/ip-stack says (ipv4, its default; ipv6;
dual-stack), which gardenlet sets from the shoot's IP families. So an apply upserts the
very record Gardener's extension made, and a takeover does not collide with it: Route 53
refuses a CNAME beside another record of the same name. A target is an alias target when
it ends in "." and one of the suffixes below, as Gardener's extension matches it; the
alias's hosted zone is the suffix's (AWS's canonical hosted zone IDs: ALB and CLB by
<region>.elb.amazonaws.com, NLB by elb.<region>.amazonaws.com; AWS GovCloud has no alias
targets). */ -}}
{{- $spec := .object.spec -}}
{{- $zone := "" -}}
{{- if dig "zone" "" $spec }}{{ $zone = $spec.zone }}{{ else if dig "zone" "" .object.status }}{{ $zone = .object.status.zone }}{{ end -}}
{{- $stack := dig "annotations" "dns.gardener.cloud/ip-stack" "ipv4" .object.metadata -}}
{{- if not (has $stack (list "ipv4" "ipv6" "dual-stack")) -}}
{{- invalid "metadata.annotations[dns.gardener.cloud/ip-stack]" $stack "must be ipv4, ipv6 or dual-stack" -}}
{{- end -}}
{{- $zones := dict -}}
{{- /* SPDX-FileCopyrightText: SAP SE or an SAP affiliate company and Gardener contributors */ -}}
{{- /*  */ -}}
{{- /* SPDX-License-Identifier: Apache-2.0 */ -}}
{{- /* Application Load Balancers and Classic Load Balancers */ -}}
{{- $_ := set $zones "us-east-2.elb.amazonaws.com" "Z3AADJGX6KTTL2" -}}
{{- $_ := set $zones "us-east-1.elb.amazonaws.com" "Z35SXDOTRQ7X7K" -}}
{{- $_ := set $zones "us-west-1.elb.amazonaws.com" "Z368ELLRRE2KJ0" -}}
{{- $_ := set $zones "us-west-2.elb.amazonaws.com" "Z1H1FL5HABSF5" -}}
{{- $_ := set $zones "ca-central-1.elb.amazonaws.com" "ZQSVJUPU6J1EY" -}}
{{- $_ := set $zones "ca-west-1.elb.amazonaws.com" "Z06473681N0SF6OS049SD" -}}
{{- $_ := set $zones "ap-east-1.elb.amazonaws.com" "Z3DQVH9N71FHZ0" -}}
{{- $_ := set $zones "ap-east-2.elb.amazonaws.com" "Z02789141MW7T1WBU19PO" -}}
{{- $_ := set $zones "ap-south-1.elb.amazonaws.com" "ZP97RAFLXTNZK" -}}
{{- $_ := set $zones "ap-south-2.elb.amazonaws.com" "Z0173938T07WNTVAEPZN" -}}
{{- $_ := set $zones "ap-northeast-2.elb.amazonaws.com" "ZWKZPGTI48KDX" -}}
{{- $_ := set $zones "ap-northeast-3.elb.amazonaws.com" "Z5LXEXXYW11ES" -}}
{{- $_ := set $zones "ap-southeast-1.elb.amazonaws.com" "Z1LMS91P8CMLE5" -}}
{{- $_ := set $zones "ap-southeast-2.elb.amazonaws.com" "Z1GM3OXH4ZPM65" -}}
{{- $_ := set $zones "ap-southeast-3.elb.amazonaws.com" "Z08888821HLRG5A9ZRTER" -}}
{{- $_ := set $zones "ap-southeast-4.elb.amazonaws.com" "Z09517862IB2WZLPXG76F" -}}
{{- $_ := set $zones "ap-southeast-5.elb.amazonaws.com" "Z06010284QMVVW7WO5J" -}}
{{- $_ := set $zones "ap-southeast-6.elb.amazonaws.com" "Z023301818UFJ50CIO0MV" -}}
{{- $_ := set $zones "ap-southeast-7.elb.amazonaws.com" "Z0390008CMBRTHFGWBCB" -}}
{{- $_ := set $zones "ap-northeast-1.elb.amazonaws.com" "Z14GRHDCWA56QT" -}}
{{- $_ := set $zones "eu-central-1.elb.amazonaws.com" "Z215JYRZR1TBD5" -}}
{{- $_ := set $zones "eu-central-2.elb.amazonaws.com" "Z06391101F2ZOEP8P5EB3" -}}
{{- $_ := set $zones "eu-west-1.elb.amazonaws.com" "Z32O12XQLNTSW2" -}}
{{- $_ := set $zones "eu-west-2.elb.amazonaws.com" "ZHURV8PSTC4K8" -}}
{{- $_ := set $zones "eu-west-3.elb.amazonaws.com" "Z3Q77PNBQS71R4" -}}
{{- $_ := set $zones "eu-north-1.elb.amazonaws.com" "Z23TAZ6LKFMNIO" -}}
{{- $_ := set $zones "eu-south-1.elb.amazonaws.com" "Z3ULH7SSC9OV64" -}}
{{- $_ := set $zones "eu-south-2.elb.amazonaws.com" "Z0956581394HF5D5LXGAP" -}}
{{- $_ := set $zones "sa-east-1.elb.amazonaws.com" "Z2P70J7HTTTPLU" -}}
{{- $_ := set $zones "cn-north-1.elb.amazonaws.com.cn" "Z1GDH35T77C1KE" -}}
{{- $_ := set $zones "cn-northwest-1.elb.amazonaws.com.cn" "ZM7IZAIOVVDZF" -}}
{{- $_ := set $zones "mx-central-1.elb.amazonaws.com" "Z023552324OKD1BB28BH5" -}}
{{- $_ := set $zones "me-central-1.elb.amazonaws.com" "Z08230872XQRWHG2XF6I" -}}
{{- $_ := set $zones "me-south-1.elb.amazonaws.com" "ZS929ML54UICD" -}}
{{- $_ := set $zones "af-south-1.elb.amazonaws.com" "Z268VQBMOI5EKX" -}}
{{- $_ := set $zones "il-central-1.elb.amazonaws.com" "Z09170902867EHPV2DABU" -}}
{{- /* Network Load Balancers */ -}}
{{- $_ := set $zones "elb.us-east-2.amazonaws.com" "ZLMOA37VPKANP" -}}
{{- $_ := set $zones "elb.us-east-1.amazonaws.com" "Z26RNL4JYFTOTI" -}}
{{- $_ := set $zones "elb.us-west-1.amazonaws.com" "Z24FKFUX50B4VW" -}}
{{- $_ := set $zones "elb.us-west-2.amazonaws.com" "Z18D5FSROUN65G" -}}
{{- $_ := set $zones "elb.ca-central-1.amazonaws.com" "Z2EPGBW3API2WT" -}}
{{- $_ := set $zones "elb.ca-west-1.amazonaws.com" "Z02754302KBB00W2LKWZ9" -}}
{{- $_ := set $zones "elb.ap-east-1.amazonaws.com" "Z12Y7K3UBGUAD1" -}}
{{- $_ := set $zones "elb.ap-east-2.amazonaws.com" "Z09176273OC2HWIAUNYW" -}}
{{- $_ := set $zones "elb.ap-south-1.amazonaws.com" "ZVDDRBQ08TROA" -}}
{{- $_ := set $zones "elb.ap-south-2.amazonaws.com" "Z0711778386UTO08407HT" -}}
{{- $_ := set $zones "elb.ap-northeast-3.amazonaws.com" "Z1GWIQ4HH19I5X" -}}
{{- $_ := set $zones "elb.ap-northeast-2.amazonaws.com" "ZIBE1TIR4HY56" -}}
{{- $_ := set $zones "elb.ap-southeast-1.amazonaws.com" "ZKVM4W9LS7TM" -}}
{{- $_ := set $zones "elb.ap-southeast-2.amazonaws.com" "ZCT6FZBF4DROD" -}}
{{- $_ := set $zones "elb.ap-southeast-3.amazonaws.com" "Z01971771FYVNCOVWJU1G" -}}
{{- $_ := set $zones "elb.ap-southeast-4.amazonaws.com" "Z01156963G8MIIL7X90IV" -}}
{{- $_ := set $zones "elb.ap-southeast-5.amazonaws.com" "Z026317210H9ACVTRO6FB" -}}
{{- $_ := set $zones "elb.ap-southeast-6.amazonaws.com" "Z01392953RKV2Q3RBP0KU" -}}
{{- $_ := set $zones "elb.ap-southeast-7.amazonaws.com" "Z054363131YWATEMWRG5L" -}}
{{- $_ := set $zones "elb.ap-northeast-1.amazonaws.com" "Z31USIVHYNEOWT" -}}
{{- $_ := set $zones "elb.eu-central-1.amazonaws.com" "Z3F0SRJ5LGBH90" -}}
{{- $_ := set $zones "elb.eu-central-2.amazonaws.com" "Z02239872DOALSIDCX66S" -}}
{{- $_ := set $zones "elb.eu-west-1.amazonaws.com" "Z2IFOLAFXWLO4F" -}}
{{- $_ := set $zones "elb.eu-west-2.amazonaws.com" "ZD4D7Y8KGAS4G" -}}
{{- $_ := set $zones "elb.eu-west-3.amazonaws.com" "Z1CMS0P5QUZ6D5" -}}
{{- $_ := set $zones "elb.eu-north-1.amazonaws.com" "Z1UDT6IFJ4EJM" -}}
{{- $_ := set $zones "elb.eu-south-1.amazonaws.com" "Z23146JA1KNAFP" -}}
{{- $_ := set $zones "elb.eu-south-2.amazonaws.com" "Z1011216NVTVYADP1SSV" -}}
{{- $_ := set $zones "elb.sa-east-1.amazonaws.com" "ZTK26PT1VY4CU" -}}
{{- $_ := set $zones "elb.cn-north-1.amazonaws.com.cn" "Z3QFB96KMJ7ED6" -}}
{{- $_ := set $zones "elb.cn-northwest-1.amazonaws.com.cn" "ZQEIKTCZ8352D" -}}
{{- $_ := set $zones "elb.mx-central-1.amazonaws.com" "Z02031231H3ID6HYJ9A7U" -}}
{{- $_ := set $zones "elb.me-central-1.amazonaws.com" "Z00282643NTTLPANJJG2P" -}}
{{- $_ := set $zones "elb.me-south-1.amazonaws.com" "Z3QSRYVP46NYYV" -}}
{{- $_ := set $zones "elb.af-south-1.amazonaws.com" "Z203XCE67M25HM" -}}
{{- $_ := set $zones "elb.il-central-1.amazonaws.com" "Z0313266YDI6ZRHTGQY4" -}}
{{- /* Global Accelerator */ -}}
{{- $_ := set $zones "awsglobalaccelerator.com" "Z2BJ6XQ5FK7U4H" -}}
{{- /* Cloudfront and AWS API Gateway edge-optimized endpoints */ -}}
{{- $_ := set $zones "cloudfront.net" "Z2FDTNDATAQYW2" -}}
{{- /* VPC Endpoint (PrivateLink) */ -}}
{{- $_ := set $zones "eu-west-2.vpce.amazonaws.com" "Z7K1066E3PUKB" -}}
{{- $_ := set $zones "us-east-2.vpce.amazonaws.com" "ZC8PG0KIFKBRI" -}}
{{- $_ := set $zones "af-south-1.vpce.amazonaws.com" "Z09302161J80N9A7UTP7U" -}}
{{- $_ := set $zones "ap-east-1.vpce.amazonaws.com" "Z2LIHJ7PKBEMWN" -}}
{{- $_ := set $zones "ap-east-2.vpce.amazonaws.com" "Z09379811HWP0POAUWVN3" -}}
{{- $_ := set $zones "ap-northeast-1.vpce.amazonaws.com" "Z2E726K9Y6RL4W" -}}
{{- $_ := set $zones "ap-northeast-2.vpce.amazonaws.com" "Z27UANNT0PRK1T" -}}
{{- $_ := set $zones "ap-northeast-3.vpce.amazonaws.com" "Z376B5OMM2JZL2" -}}
{{- $_ := set $zones "ap-south-1.vpce.amazonaws.com" "Z2KVTB3ZLFM7JR" -}}
{{- $_ := set $zones "ap-south-2.vpce.amazonaws.com" "Z0952991RWSF5AHIQDIY" -}}
{{- $_ := set $zones "ap-southeast-1.vpce.amazonaws.com" "Z18LLCSTV4NVNL" -}}
{{- $_ := set $zones "ap-southeast-2.vpce.amazonaws.com" "ZDK2GCRPAFKGO" -}}
{{- $_ := set $zones "ap-southeast-3.vpce.amazonaws.com" "Z03881013RZ9BYYZO8N5W" -}}
{{- $_ := set $zones "ap-southeast-4.vpce.amazonaws.com" "Z07508191CO1RNBX3X3AU" -}}
{{- $_ := set $zones "ca-central-1.vpce.amazonaws.com" "ZRCXCF510Y6P9" -}}
{{- $_ := set $zones "eu-central-1.vpce.amazonaws.com" "Z273ZU8SZ5RJPC" -}}
{{- $_ := set $zones "eu-central-2.vpce.amazonaws.com" "Z045369019J4FUQ4S272E" -}}
{{- $_ := set $zones "eu-north-1.vpce.amazonaws.com" "Z3OWWK6JFDEDGC" -}}
{{- $_ := set $zones "eu-south-1.vpce.amazonaws.com" "Z2A5FDNRLY7KZG" -}}
{{- $_ := set $zones "eu-south-2.vpce.amazonaws.com" "Z014396544HENR57XQCJ" -}}
{{- $_ := set $zones "eu-west-1.vpce.amazonaws.com" "Z38GZ743OKFT7T" -}}
{{- $_ := set $zones "eu-west-3.vpce.amazonaws.com" "Z1DWHTMFP0WECP" -}}
{{- $_ := set $zones "me-central-1.vpce.amazonaws.com" "Z07122992YCEUCB9A9570" -}}
{{- $_ := set $zones "me-south-1.vpce.amazonaws.com" "Z3B95P3VBGEQGY" -}}
{{- $_ := set $zones "sa-east-1.vpce.amazonaws.com" "Z2LXUWEVLCVZIB" -}}
{{- $_ := set $zones "us-east-1.vpce.amazonaws.com" "Z7HUB22UULQXV" -}}
{{- $_ := set $zones "us-west-1.vpce.amazonaws.com" "Z12I86A8N7VCZO" -}}
{{- $_ := set $zones "us-west-2.vpce.amazonaws.com" "Z1YSA3EXCYUU9Z" -}}
{{- /* AWS API Gateway (Regional endpoints) */ -}}
{{- $_ := set $zones "execute-api.us-east-2.amazonaws.com" "ZOJJZC49E0EPZ" -}}
{{- $_ := set $zones "execute-api.us-east-1.amazonaws.com" "Z1UJRXOUMOOFQ8" -}}
{{- $_ := set $zones "execute-api.us-west-1.amazonaws.com" "Z2MUQ32089INYE" -}}
{{- $_ := set $zones "execute-api.us-west-2.amazonaws.com" "Z2OJLYMUO9EFXC" -}}
{{- $_ := set $zones "execute-api.af-south-1.amazonaws.com" "Z2DHW2332DAMTN" -}}
{{- $_ := set $zones "execute-api.ap-east-1.amazonaws.com" "Z3FD1VL90ND7K5" -}}
{{- $_ := set $zones "execute-api.ap-east-2.amazonaws.com" "Z02909591O7FG9Q56HWB1" -}}
{{- $_ := set $zones "execute-api.ap-south-1.amazonaws.com" "Z3VO1THU9YC4UR" -}}
{{- $_ := set $zones "execute-api.ap-northeast-2.amazonaws.com" "Z20JF4UZKIW1U8" -}}
{{- $_ := set $zones "execute-api.ap-southeast-1.amazonaws.com" "ZL327KTPIQFUL" -}}
{{- $_ := set $zones "execute-api.ap-southeast-2.amazonaws.com" "Z2RPCDW04V8134" -}}
{{- $_ := set $zones "execute-api.ap-northeast-1.amazonaws.com" "Z1YSHQZHG15GKL" -}}
{{- $_ := set $zones "execute-api.ca-central-1.amazonaws.com" "Z19DQILCV0OWEC" -}}
{{- $_ := set $zones "execute-api.eu-central-1.amazonaws.com" "Z1U9ULNL0V5AJ3" -}}
{{- $_ := set $zones "execute-api.eu-west-1.amazonaws.com" "ZLY8HYME6SFDD" -}}
{{- $_ := set $zones "execute-api.eu-west-2.amazonaws.com" "ZJ5UAJN8Y3Z2Q" -}}
{{- $_ := set $zones "execute-api.eu-south-1.amazonaws.com" "Z3BT4WSQ9TDYZV" -}}
{{- $_ := set $zones "execute-api.eu-west-3.amazonaws.com" "Z3KY65QIEKYHQQ" -}}
{{- $_ := set $zones "execute-api.eu-south-2.amazonaws.com" "Z02499852UI5HEQ5JVWX3" -}}
{{- $_ := set $zones "execute-api.eu-north-1.amazonaws.com" "Z3UWIKFBOOGXPP" -}}
{{- $_ := set $zones "execute-api.me-south-1.amazonaws.com" "Z20ZBPC0SS8806" -}}
{{- $_ := set $zones "execute-api.me-central-1.amazonaws.com" "Z08780021BKYYY8U0YHTV" -}}
{{- $_ := set $zones "execute-api.sa-east-1.amazonaws.com" "ZCMLWB8V5SYIT" -}}
{{- $aliasZone := "" -}}
{{- if eq $spec.recordType "CNAME" -}}
{{- $target := index $spec.values 0 -}}
{{- range $suffix, $id := $zones -}}
{{- if hasSuffix (printf ".%s" $suffix) $target }}{{ $aliasZone = $id }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $aliasTypes := list "A" -}}
{{- if eq $stack "ipv6" }}{{ $aliasTypes = list "AAAA" }}{{ else if eq $stack "dual-stack" }}{{ $aliasTypes = list "A" "AAAA" }}{{ end -}}
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
{{- if not $aliasZone }}

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
{{- else }}
{{- range $i, $type := $aliasTypes }}
{{ if $i }}
# The alias {{ $type }} record, made after the first, whose replacement deletes a CNAME an
# earlier apply made first: Route 53 keeps no other record beside a CNAME.
{{- else }}
# The alias {{ $type }} record of the CNAME's target, in the target's canonical hosted zone.
{{- end }}
resource "aws_route53_record" "{{ if $i }}record_{{ lower $type }}{{ else }}record{{ end }}" {
  zone_id         = local.zone_id
  name            = local.record_name
  type            = "{{ $type }}"
  allow_overwrite = true

  alias {
    name                   = {{ tfvar "alias_target" (index $spec.values 0) }}
    zone_id                = "{{ $aliasZone }}"
    evaluate_target_health = true
  }
{{- if $i }}

  depends_on = [aws_route53_record.record]
{{- end }}

  lifecycle {
    precondition {
      condition     = local.zone_id != null
      error_message = "No public hosted zone of the account holds the record's name: create one, or name the zone in spec.zone."
    }
  }
}
{{- end }}
{{- end }}
