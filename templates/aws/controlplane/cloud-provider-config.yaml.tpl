{{- $vpc := dig "vpc" dict .controlPlane.infrastructureProviderStatus -}}
{{- if not (hasKey $vpc "id") -}}
{{- invalid "infrastructureProviderStatus.vpc.id" "" "the Infrastructure's status has no VPC: the cloud-controller-manager needs one" -}}
{{- end -}}
{{- $nodeSubnets := list -}}
{{- $firstIndex := -1 -}}
{{- range $i, $subnet := dig "subnets" list $vpc }}{{ if eq (dig "purpose" "" $subnet) "nodes" }}{{ $nodeSubnets = append $nodeSubnets $subnet }}{{ if lt $firstIndex 0 }}{{ $firstIndex = $i }}{{ end }}{{ end }}{{ end -}}
{{- if not $nodeSubnets -}}
{{- invalid "infrastructureProviderStatus.vpc.subnets" "" "the Infrastructure's status has no subnet of purpose nodes" -}}
{{- end -}}
{{- $first := first $nodeSubnets -}}
{{- $conf := list
  "[Global]"
  (printf "VPC=%s" (iniValue "infrastructureProviderStatus.vpc.id" $vpc.id))
  (printf "SubnetID=%s" (iniValue (printf "infrastructureProviderStatus.vpc.subnets[%d].id" $firstIndex) (dig "id" "" $first)))
  "DisableSecurityGroupIngress=true"
  (printf "KubernetesClusterTag=%s" (iniValue "metadata.namespace" .controlPlane.namespace))
  (printf "KubernetesClusterID=%s" (iniValue "metadata.namespace" .controlPlane.namespace))
  (printf "Zone=%s" (iniValue (printf "infrastructureProviderStatus.vpc.subnets[%d].zone" $firstIndex) (dig "zone" "" $first)))
  | join "\n" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: cloud-provider-config
  labels:
    app: kubernetes
    role: cloud-controller-manager
data:
  cloudprovider.conf: {{ printf "%s\n" $conf | toJson }}
