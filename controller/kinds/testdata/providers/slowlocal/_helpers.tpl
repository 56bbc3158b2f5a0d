{{- /* A kind made slowly, for tests of a deletion while its run is under way: one ConfigMap
per step in an existing namespace (providerConfig), each followed by a pause. Called with
(dict "root" . "prefix" "<the ConfigMaps' prefix>"). */ -}}
{{- define "slowlocal.steps" -}}
{{- $config := .root.object.spec.providerConfig -}}
{{- $prefix := .prefix -}}
terraform {
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "1.19.0"
    }
  }
}

locals {
  kubeconfig = yamldecode({{ .root.credentials.kubeconfig }})
  context    = one([for c in local.kubeconfig.contexts : c.context if c.name == local.kubeconfig["current-context"]])
  cluster    = one([for c in local.kubeconfig.clusters : c.cluster if c.name == local.context.cluster])
  user       = one([for u in local.kubeconfig.users : u.user if u.name == local.context.user])
  namespace  = {{ tfvar "namespace" $config.namespace }}
  seconds    = {{ tfvar "seconds" $config.seconds }}
}

provider "kubectl" {
  load_config_file       = false
  host                   = local.cluster.server
  cluster_ca_certificate = try(base64decode(local.cluster["certificate-authority-data"]), null)
  client_certificate     = try(base64decode(local.user["client-certificate-data"]), null)
  client_key             = try(base64decode(local.user["client-key-data"]), null)
  token                  = try(local.user.token, null)
}
{{ range $i := until (int $config.steps) }}
resource "kubectl_manifest" "step_{{ $i }}" {
  {{- if gt $i 0 }}
  depends_on = [terraform_data.pause_{{ sub $i 1 }}]
  {{- end }}
  yaml_body  = yamlencode({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "{{ $prefix }}-step-{{ $i }}", namespace = local.namespace } })
}

resource "terraform_data" "pause_{{ $i }}" {
  depends_on = [kubectl_manifest.step_{{ $i }}]
  provisioner "local-exec" {
    command = "sleep ${local.seconds}"
  }
}
{{ end }}
{{- end -}}
