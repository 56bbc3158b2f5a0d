{{- /* A DNSRecord made slowly: ConfigMaps record-step-<i>. */ -}}
{{ template "slowlocal.steps" (dict "root" . "prefix" "record") }}
