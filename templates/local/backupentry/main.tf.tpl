{{- /* An entry is a ConfigMap in its bucket's namespace that names the prefix its
backups are written under. */ -}}
{{ template "local.terraform" . }}
resource "kubectl_manifest" "entry" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "entry-{{ .object.metadata.name | sha256sum | trunc 40 }}"
      namespace = "{{ template "local.bucketNamespace" .object.spec.bucketName }}"
      labels    = { "app.kubernetes.io/managed-by" = "terraseed" }
    }
    data = {
      prefix = {{ tfvar "prefix" .object.metadata.name }}
      bucket = {{ tfvar "bucket_name" .object.spec.bucketName }}
    }
  })
}
