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

{{/* A list of strings as a CEL list literal; a value holding a quote or backslash fails. */}}
{{- define "terraseed.celList" -}}
{{- $items := list -}}
{{- range .list -}}
{{- if or (contains "'" .) (contains "\\" .) -}}
{{- fail (printf "%s: %q must hold no quote or backslash" $.field .) -}}
{{- end -}}
{{- $items = append $items (printf "'%s'" .) -}}
{{- end -}}
{{- printf "[%s]" (join ", " $items) -}}
{{- end -}}

{{/* The image prefixes of controlPlane.allowedImages, each ending at a boundary of an image
reference: a prefix that does not end in /, : or @ stands for itself followed by one of them,
so that registry.k8s.io does not admit registry.k8s.io.attacker.example. As
--controlplane-allowed-images normalises them. */}}
{{- define "terraseed.imagePrefixes" -}}
{{- $prefixes := list -}}
{{- range .Values.controlPlane.allowedImages -}}
{{- if or (hasSuffix "/" .) (hasSuffix ":" .) (hasSuffix "@" .) -}}
{{- $prefixes = append $prefixes . -}}
{{- else if . -}}
{{- $prefixes = append $prefixes (printf "%s/" .) (printf "%s:" .) (printf "%s@" .) -}}
{{- end -}}
{{- end -}}
{{- include "terraseed.celList" (dict "list" $prefixes "field" "controlPlane.allowedImages") -}}
{{- end -}}

{{/*
The labels of a namespaceLabels value that are set, as YAML. A label set to null is
removed: helm removes it on install, but `helm upgrade --reuse-values` hands it to the
templates as a nil value, which would render as the label value "<nil>".
*/}}
{{- define "terraseed.setLabels" -}}
{{- $set := dict }}
{{- range $key, $value := . }}
{{- if not (kindIs "invalid" $value) }}
{{- $_ := set $set $key $value }}
{{- end }}
{{- end }}
{{- if $set }}{{ toYaml $set }}{{ end }}
{{- end }}

{{/* The resources of the kinds served besides the Infrastructure, a YAML list; a kind
not served from templates fails the render. */}}
{{- define "terraseed.kindResources" -}}
{{- $resources := dict "backupbucket" "backupbuckets" "backupentry" "backupentries" "dnsrecord" "dnsrecords" "bastion" "bastions" "selfhostedshootexposure" "selfhostedshootexposures" -}}
{{- $out := list -}}
{{- range .Values.kinds -}}
{{- if not (hasKey $resources .) -}}
{{- fail (printf "kinds: %q is no kind served from templates (one of backupbucket, backupentry, dnsrecord, bastion, selfhostedshootexposure)" .) -}}
{{- end -}}
{{- $out = append $out (get $resources .) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
