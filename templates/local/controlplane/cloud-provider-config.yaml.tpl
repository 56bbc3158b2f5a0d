{{- $infra := .controlPlane.infrastructureProviderStatus -}}
{{- $zones := list -}}
{{- range $zone := dig "zones" list $infra }}{{ $zones = append $zones (dig "name" "" $zone) }}{{ end -}}
{{- $conf := list
  "[Global]"
  (printf "cluster = %s" .controlPlane.namespace)
  (printf "region = %s" .controlPlane.region)
  (printf "namespace = %s" (dig "namespace" "" $infra))
  (printf "zones = %s" (join "," $zones))
  | join "\n" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: cloud-provider-config
  labels:
    app: cloud-controller-manager
data:
  cloudprovider.conf: {{ printf "%s\n" $conf | toJson }}
