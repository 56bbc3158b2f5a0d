{{- /* The kubectl provider and how it reaches the cluster, for every kind's directory. */ -}}
{{- define "local.terraform" -}}
terraform {
  required_version = ">= 1.5"
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "1.19.0"
    }
  }
}
{{ if .workloadIdentity }}
provider "kubectl" {
  load_config_file       = false
  host                   = {{ .credentials.config.server }}
  cluster_ca_certificate = {{ .credentials.config.certificateAuthorityData }} == "" ? null : base64decode({{ .credentials.config.certificateAuthorityData }})
  token                  = sensitive(trimspace(file({{ .credentials.token }})))
}
{{ else }}
# The kubeconfig arrives as a sensitive variable; the machine's own ~/.kube/config is never read.
locals {
  kubeconfig = yamldecode({{ .credentials.kubeconfig }})
  context    = one([for c in local.kubeconfig.contexts : c.context if c.name == local.kubeconfig["current-context"]])
  cluster    = one([for c in local.kubeconfig.clusters : c.cluster if c.name == local.context.cluster])
  user       = one([for u in local.kubeconfig.users : u.user if u.name == local.context.user])
}

provider "kubectl" {
  load_config_file       = false
  host                   = local.cluster.server
  cluster_ca_certificate = try(base64decode(local.cluster["certificate-authority-data"]), null)
  client_certificate     = try(base64decode(local.user["client-certificate-data"]), null)
  client_key             = try(base64decode(local.user["client-key-data"]), null)
  token                  = try(local.user.token, null)
}
{{ end }}
{{- end -}}

{{- /* The namespace that stands for a BackupBucket: its name when that makes a namespace
name, else a digest of it. A BackupEntry finds its bucket's by the same rule. */ -}}
{{- define "local.bucketNamespace" -}}
{{- if and (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .) (le (len .) 56) -}}
bucket-{{ . }}
{{- else -}}
bucket-{{ sha256sum . | trunc 20 }}
{{- end -}}
{{- end -}}
