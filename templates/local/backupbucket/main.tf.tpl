{{- /* A bucket is a namespace of the cluster; its entries' backups are ConfigMaps in it. */ -}}
{{- /* The name "local.bucketNamespace" gives, as a value. */ -}}
{{- $name := .object.metadata.name -}}
{{- $namespace := printf "bucket-%s" (sha256sum $name | trunc 20) -}}
{{- if and (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) (le (len $name) 56) }}{{ $namespace = printf "bucket-%s" $name }}{{ end -}}
{{ template "local.terraform" . }}
# The namespace is this object's alone: its label terraseed.io/owner-uid names the UID of
# the object, its annotation terraseed.io/owner the object's kind and key; the controller
# refuses another object that names it (owned_namespace).
resource "kubectl_manifest" "bucket" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Namespace"
    metadata = {
      name = {{ tfvar "owned_namespace" $namespace }}
      labels = {
        "app.kubernetes.io/managed-by"     = "terraseed"
        "backup.terraseed.io/region"       = {{ tfvar "region" .object.spec.region }}
        "terraseed.io/owner-uid"           = {{ tfvar "owner_uid" .object.metadata.uid }}
      }
      annotations = { "terraseed.io/owner" = {{ tfvar "owner" (printf "BackupBucket %s" .object.metadata.name) }} }
    }
  })
}
