apiVersion: v1
kind: ConfigMap
metadata:
  name: always
data:
  region: {{ .controlPlane.region | toJson }}
{{- if dig "extra" false .controlPlane.providerConfig }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: extra
data:
  extra: "true"
{{- end }}
