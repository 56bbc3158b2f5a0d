{{- $config := .infrastructure.providerConfig -}}
terraform {
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "1.19.0"
    }
  }
}

locals {
  kubeconfig = yamldecode({{ .credentials.kubeconfig }})
  context    = one([for c in local.kubeconfig.contexts : c.context if c.name == local.kubeconfig["current-context"]])
  cluster    = one([for c in local.kubeconfig.clusters : c.cluster if c.name == local.context.cluster])
  user       = one([for u in local.kubeconfig.users : u.user if u.name == local.context.user])
  namespace  = {{ tfvar "namespace" $config.namespace }}
}

provider "kubectl" {
  load_config_file       = false
  host                   = local.cluster.server
  cluster_ca_certificate = try(base64decode(local.cluster["certificate-authority-data"]), null)
  client_certificate     = try(base64decode(local.user["client-certificate-data"]), null)
  client_key             = try(base64decode(local.user["client-key-data"]), null)
  token                  = try(local.user.token, null)
}

resource "kubectl_manifest" "namespace" {
  yaml_body = yamlencode({ apiVersion = "v1", kind = "Namespace", metadata = { name = local.namespace } })
}
{{ range $i, $zone := $config.zones }}
# Zone {{ $i }}: an id, new whenever the zone's name changes, then a ConfigMap named after it.
resource "terraform_data" "zone_{{ $i }}" {
  input = {{ tfvar (printf "zone_%d" $i) $zone }}
  provisioner "local-exec" {
    command = "sleep 1"
  }
}

resource "kubectl_manifest" "zone_{{ $i }}" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata   = { name = "zone-{{ $i }}-${terraform_data.zone_{{ $i }}.id}", namespace = local.namespace, labels = { "soak" = "zone" } }
    data       = { zone = terraform_data.zone_{{ $i }}.input }
  })
}
{{ end }}
output "namespace" {
  value = local.namespace
}
