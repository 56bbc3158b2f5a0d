{{- /* A BackupBucket made slowly: ConfigMaps bucket-step-<i>. */ -}}
{{ template "slowlocal.steps" (dict "root" . "prefix" "bucket") }}
