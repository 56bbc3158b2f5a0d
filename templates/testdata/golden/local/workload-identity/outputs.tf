output "namespace" {
  value = kubectl_manifest.namespace.name
}

output "network_policies" {
  value = [
    kubectl_manifest.deny_all.name,
    kubectl_manifest.zone_0.name,
  ]
}

output "zones" {
  value = [
    { name = var.zone_0_name, workers = var.zone_0_workers, networkPolicy = kubectl_manifest.zone_0.name },
  ]
}

output "ssh_public_key_secret" {
  value = kubectl_manifest.ssh_public_key.name
}

# The nodes CIDR: the configured one, else the shoot's, else the whole network.
output "nodes_cidr" {
  value = var.network_cidr
}
