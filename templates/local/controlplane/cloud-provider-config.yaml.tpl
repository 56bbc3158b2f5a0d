{{- $infra := .controlPlane.infrastructureProviderStatus -}}
{{- $zones := list -}}
{{- range $i, $zone := dig "zones" list $infra }}{{ $zones = append $zones (iniValue (printf "infrastructureProviderStatus.zones[%d].name" $i) (dig "name" "" $zone)) }}{{ end -}}
{{- $conf := list
  "[Global]"
  (printf "cluster = %s" (iniValue "metadata.namespace" .controlPlane.namespace))
  (printf "region = %s" (iniValue "spec.region" .controlPlane.region))
  (printf "namespace = %s" (iniValue "infrastructureProviderStatus.namespace" (dig "namespace" "" $infra)))
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
