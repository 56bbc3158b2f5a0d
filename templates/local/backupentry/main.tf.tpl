{{- /* An entry is a ConfigMap in its bucket's namespace that names the prefix its
backups are written under, and, for the prefix itself, a namespace of its own that holds
the backups: deleting the entry deletes that namespace, and the cluster then removes every
object in it, as a cloud's bucket removes the objects under a deleted prefix. The entry of
a source backup (a control plane migration) is named "source-" and the shoot's entry name:
it reads the backups under the shoot's prefix and owns none of them, so its deletion leaves
them. */ -}}
{{- $prefix := trimPrefix "source-" .object.metadata.name -}}
{{ template "local.terraform" . }}
locals {
  # The bucket's name and the prefix, digested: at most 48 characters, a namespace's name.
  backups = "backups-{{ printf "%s/%s" .object.spec.bucketName $prefix | sha256sum | trunc 40 }}"
}

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
      prefix  = var.prefix
      bucket  = {{ tfvar "bucket_name" .object.spec.bucketName }}
      backups = local.backups
    }
  })
}
{{- if not (hasPrefix "source-" .object.metadata.name) }}

resource "kubectl_manifest" "backups" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Namespace"
    metadata = {
      name = local.backups
      labels = {
        "app.kubernetes.io/managed-by" = "terraseed"
        "backup.terraseed.io/bucket"   = "{{ template "local.bucketNamespace" .object.spec.bucketName }}"
        "backup.terraseed.io/region"   = {{ tfvar "region" .object.spec.region }}
      }
    }
  })
}
{{- end }}
