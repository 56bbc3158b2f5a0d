{{- /* The entry of a source backup (a control plane migration) is named "source-" and
the shoot's entry name, and reads the backups under the shoot's prefix. */ -}}
output "prefix" {
  value = {{ tfvar "prefix" (printf "%s/" (trimPrefix "source-" .object.metadata.name)) }}
}

output "region" {
  value = {{ tfvar "region" .object.spec.region }}
}
