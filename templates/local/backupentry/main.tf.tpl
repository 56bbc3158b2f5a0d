{{- /* An entry is a ConfigMap in its bucket's namespace that names the prefix its
backups are written under, and, for the prefix itself, a namespace of its own that holds
the backups: deleting the entry deletes that namespace, and the cluster then removes every
object in it, as a cloud's bucket removes the objects under a deleted prefix. The entry of
a source backup (a control plane migration) is named "source-" and the shoot's entry name:
it reads the backups under the shoot's prefix and owns none of them, so its deletion leaves
them.

Where the backups are is settled when the entry is created, and the ConfigMap records it:
Gardener restores a shoot's entry on the destination seed with that seed's bucket, and a
"source-" entry of the source seed's bucket reads the backups to copy them. The restored
entry keeps its ConfigMap, in the bucket it was created in, and its namespace, which the
source entry names: a namespace of the new bucket's name would replace the one that holds
the backups, and destroy them before they are read. Should the ConfigMap go (with the
namespace of the bucket it is in), the entry would name its current bucket's namespace
again: the destroy guard refuses that plan, and the backups stay. */ -}}
{{- $prefix := trimPrefix "source-" .object.metadata.name -}}
{{ template "local.terraform" . }}
locals {
  # The bucket's name and the prefix, digested: at most 48 characters, a namespace's name.
  # A source entry owns the namespace of its prefix not: it only names it.
  named = {{ tfvar (ternary "backups" "owned_namespace" (hasPrefix "source-" .object.metadata.name)) (printf "backups-%s" (printf "%s/%s" .object.spec.bucketName $prefix | sha256sum | trunc 40)) }}
  # The namespace the entry's ConfigMap recorded when it was created: the one that holds
  # its backups whatever bucket the entry names since.
  backups = nonsensitive(yamldecode(kubectl_manifest.entry.yaml_body).data.backups)
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
      backups = local.named
    }
  })
  # Written once: a restore with another bucket would move it, and so the namespace of
  # the backups it names, by a replace.
  lifecycle {
    ignore_changes = [yaml_body]
  }
}
{{- if not (hasPrefix "source-" .object.metadata.name) }}

# The namespace is this object's alone: its label terraseed.io/owner-uid names the UID of
# the object, its annotation terraseed.io/owner the object's kind and key; the controller
# refuses another object that names it (owned_namespace).
resource "kubectl_manifest" "backups" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Namespace"
    metadata = {
      name = local.backups
      labels = {
        "app.kubernetes.io/managed-by" = "terraseed"
        "backup.terraseed.io/bucket"   = kubectl_manifest.entry.namespace
        "backup.terraseed.io/region"   = {{ tfvar "region" .object.spec.region }}
        "terraseed.io/owner-uid"       = {{ tfvar "owner_uid" .object.metadata.uid }}
      }
      annotations = { "terraseed.io/owner" = {{ tfvar "owner" (printf "BackupEntry %s" .object.metadata.name) }} }
    }
  })
}
{{- end }}
