{{- /* A Bastion made slowly: ConfigMaps bastion-step-<i>. */ -}}
{{ template "slowlocal.steps" (dict "root" . "prefix" "bastion") }}
