{{- define "terraseed.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "terraseed.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "terraseed.labels" -}}
{{ include "terraseed.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "terraseed.serviceAccountName" -}}
{{- default (include "terraseed.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* repository:tag or repository@digest */}}
{{- define "terraseed.imageRef" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (default .appVersion .image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "terraseed.image" -}}
{{- include "terraseed.imageRef" (dict "image" .Values.image "appVersion" .Chart.AppVersion) -}}
{{- end -}}

{{- define "terraseed.terraformerImage" -}}
{{- if .Values.terraformer.image.repository -}}
{{- include "terraseed.imageRef" (dict "image" .Values.terraformer.image "appVersion" .Chart.AppVersion) -}}
{{- else -}}
{{- include "terraseed.image" . -}}
{{- end -}}
{{- end -}}

{{/* A map as key=value,key=value, sorted by key. */}}
{{- define "terraseed.keyValues" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
