{{- $vpc := dig "vpc" dict .controlPlane.infrastructureProviderStatus -}}
{{- if not (hasKey $vpc "id") -}}
{{- invalid "infrastructureProviderStatus.vpc.id" "" "the Infrastructure's status has no VPC: the cloud-controller-manager needs one" -}}
{{- end -}}
{{- $nodeSubnets := list -}}
{{- range $subnet := dig "subnets" list $vpc }}{{ if eq (dig "purpose" "" $subnet) "nodes" }}{{ $nodeSubnets = append $nodeSubnets $subnet }}{{ end }}{{ end -}}
{{- if not $nodeSubnets -}}
{{- invalid "infrastructureProviderStatus.vpc.subnets" "" "the Infrastructure's status has no subnet of purpose nodes" -}}
{{- end -}}
{{- $first := first $nodeSubnets -}}
{{- $conf := list
  "[Global]"
  (printf "VPC=%s" $vpc.id)
  (printf "SubnetID=%s" (dig "id" "" $first))
  "DisableSecurityGroupIngress=true"
  (printf "KubernetesClusterTag=%s" .controlPlane.namespace)
  (printf "KubernetesClusterID=%s" .controlPlane.namespace)
  (printf "Zone=%s" (dig "zone" "" $first))
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
