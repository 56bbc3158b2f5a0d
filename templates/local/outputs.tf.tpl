{{- $config := .infrastructure.providerConfig -}}
{{- $networking := dig "spec" "networking" dict .cluster.shoot -}}
output "namespace" {
  value = kubectl_manifest.namespace.name
}

output "network_policies" {
  value = [
    kubectl_manifest.deny_all.name,
    {{- range $i, $zone := $config.networks.zones }}
    kubectl_manifest.zone_{{ $i }}.name,
    {{- end }}
    {{- if or (hasKey $networking "pods") (hasKey $networking "services") }}
    kubectl_manifest.shoot_networks.name,
    {{- end }}
  ]
}

output "zones" {
  value = [
    {{- range $i, $zone := $config.networks.zones }}
    { name = var.zone_{{ $i }}_name, workers = var.zone_{{ $i }}_workers, networkPolicy = kubectl_manifest.zone_{{ $i }}.name },
    {{- end }}
  ]
}

output "ssh_public_key_secret" {
  value = {{ if .infrastructure.sshPublicKey }}kubectl_manifest.ssh_public_key.name{{ else }}""{{ end }}
}

# The nodes CIDR: the configured one, else the shoot's, else the whole network.
output "nodes_cidr" {
  value = {{ if hasKey $config.networks "nodes" }}{{ tfvar "nodes_cidr" $config.networks.nodes }}{{ else if hasKey $networking "nodes" }}{{ tfvar "nodes_cidr" $networking.nodes }}{{ else }}{{ tfvar "network_cidr" $config.networks.cidr }}{{ end }}
}
