output "hostname" {
  value = "${kubectl_manifest.service.name}.${local.namespace}.svc"
}

output "namespace" {
  value = kubectl_manifest.namespace.name
}
