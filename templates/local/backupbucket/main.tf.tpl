{{- /* A bucket is a namespace of the cluster; its entries' backups are ConfigMaps in it. */ -}}
{{ template "local.terraform" . }}
resource "kubectl_manifest" "bucket" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Namespace"
    metadata = {
      name = "{{ template "local.bucketNamespace" .object.metadata.name }}"
      labels = {
        "app.kubernetes.io/managed-by"     = "terraseed"
        "backup.terraseed.io/region"       = {{ tfvar "region" .object.spec.region }}
      }
    }
  })
}
