output "zone" {
  value = var.zone
}

output "config_map" {
  value = kubectl_manifest.record.name
}
