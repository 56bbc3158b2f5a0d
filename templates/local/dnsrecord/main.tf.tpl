{{- /* A DNS record is a ConfigMap that a resolver (or a test) reads: one per name and
record type, named by a digest of both, labelled with the zone's digest. The zone is
spec.zone, else the one found before (status.zone), else the name without its first label. */ -}}
{{- $spec := .object.spec -}}
{{- $config := dig "providerConfig" dict $spec -}}
{{- $zone := "" -}}
{{- if dig "zone" "" $spec }}{{ $zone = $spec.zone }}{{ else if dig "zone" "" .object.status }}{{ $zone = .object.status.zone }}{{ else }}{{ $zone = regexReplaceAll "^[^.]*\\.?" (trimSuffix "." $spec.name) "" }}{{ end -}}
{{- if not $zone -}}
{{- invalid "spec.name" $spec.name "a record of a top-level name needs spec.zone" -}}
{{- end -}}
{{ template "local.terraform" . }}
resource "kubectl_manifest" "record" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "dnsrecord-{{ printf "%s/%s" (trimSuffix "." $spec.name | lower) $spec.recordType | sha256sum | trunc 40 }}"
      namespace = {{ tfvar "namespace" (dig "namespace" "default" $config) }}
      labels = {
        "app.kubernetes.io/managed-by" = "terraseed"
        "dns.terraseed.io/zone"        = "{{ $zone | sha256sum | trunc 40 }}"
      }
    }
    data = {
      name   = {{ tfvar "record_name" (trimSuffix "." $spec.name | lower) }}
      type   = {{ tfvar "record_type" $spec.recordType }}
      zone   = {{ tfvar "zone" $zone }}
      ttl    = tostring({{ tfvar "ttl" (dig "ttl" 120 $spec) }})
      values = jsonencode({{ tfvar "record_values" $spec.values }})
    }
  })
}
