output "names" {
  value = kubectl_manifest.item[*].name
}

output "namespace" {
  value = var.namespace
}

output "resources" {
  value = var.resources
}

output "labels" {
  value = { for i, item in kubectl_manifest.item : tostring(i) => item.name }
}
