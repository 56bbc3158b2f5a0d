output "prefix" {
  value = {{ tfvar "prefix" (trimPrefix "source-" .object.metadata.name) }}
}

output "backups_namespace" {
  value = local.backups
}
