{{- /* A BackupEntry made slowly: ConfigMaps entry-step-<i>. */ -}}
{{ template "slowlocal.steps" (dict "root" . "prefix" "entry") }}
