{{- $config := .infrastructure.providerConfig -}}
{{- $networking := dig "spec" "networking" dict .cluster.shoot -}}
{{- $namespace := dig "namespace" (printf "%s--%s" .infrastructure.namespace .infrastructure.name) $config -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" $namespace) -}}
{{- invalid "providerConfig.namespace" $namespace "the default, <infrastructure namespace>--<infrastructure name>, is no namespace name (a DNS label of at most 63 characters): set providerConfig.namespace" -}}
{{- end -}}
terraform {
  required_version = ">= 1.5"
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "1.19.0"
    }
  }
}

{{ if .workloadIdentity -}}
# A workload identity: a ServiceAccount token of the cluster, read from its file (which the
# run keeps as fresh as the Secret) by each terraform command; the server and its CA come
# from the identity's config.
locals {
{{ else -}}
# The kubeconfig arrives as a sensitive variable; the machine's own ~/.kube/config is never read.
locals {
  kubeconfig = yamldecode({{ .credentials.kubeconfig }})
  context    = one([for c in local.kubeconfig.contexts : c.context if c.name == local.kubeconfig["current-context"]])
  cluster    = one([for c in local.kubeconfig.clusters : c.cluster if c.name == local.context.cluster])
  user       = one([for u in local.kubeconfig.users : u.user if u.name == local.context.user])

{{ end -}}
  namespace = {{ tfvar "owned_namespace" $namespace }}
  labels = {
    "app.kubernetes.io/managed-by"      = "terraseed"
    "infrastructure.terraseed.io/name"  = {{ tfvar "infrastructure_name" .infrastructure.name }}
    "infrastructure.terraseed.io/shoot" = {{ tfvar "shoot_namespace" .infrastructure.namespace }}
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
provider "kubectl" {
  load_config_file       = false
  host                   = local.cluster.server
  cluster_ca_certificate = try(base64decode(local.cluster["certificate-authority-data"]), null)
  client_certificate     = try(base64decode(local.user["client-certificate-data"]), null)
  client_key             = try(base64decode(local.user["client-key-data"]), null)
  token                  = try(local.user.token, null)
}
{{ end }}
# The namespace is this object's alone: its label terraseed.io/owner-uid names the UID of
# the object, its annotation terraseed.io/owner the object's kind and key; the controller
# refuses another object that names it (owned_namespace).
resource "kubectl_manifest" "namespace" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Namespace"
    metadata = {
      name        = local.namespace
      labels      = merge(local.labels, { "terraseed.io/owner-uid" = {{ tfvar "owner_uid" .infrastructure.uid }} })
      annotations = { "terraseed.io/owner" = {{ tfvar "owner" (printf "Infrastructure %s/%s" .infrastructure.namespace .infrastructure.name) }} }
    }
  })
}

# Nothing flows unless a policy below allows it.
resource "kubectl_manifest" "deny_all" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "networking.k8s.io/v1"
    kind       = "NetworkPolicy"
    metadata   = { name = "deny-all", namespace = local.namespace, labels = local.labels }
    spec       = { podSelector = {}, policyTypes = ["Ingress", "Egress"] }
  })
}
{{ range $i, $zone := $config.networks.zones }}
# Zone {{ $i }}: pods in the zone talk to the zone's worker network.
resource "kubectl_manifest" "zone_{{ $i }}" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "networking.k8s.io/v1"
    kind       = "NetworkPolicy"
    metadata   = { name = "zone-{{ $i }}", namespace = local.namespace, labels = local.labels }
    spec = {
      podSelector = { matchLabels = { "topology.kubernetes.io/zone" = {{ tfvar (printf "zone_%d_name" $i) $zone.name }} } }
      policyTypes = ["Ingress", "Egress"]
      ingress     = [{ from = [{ ipBlock = { cidr = {{ tfvar (printf "zone_%d_workers" $i) $zone.workers }} } }] }]
      egress      = [{ to = [{ ipBlock = { cidr = var.zone_{{ $i }}_workers } }] }]
    }
  })
}
{{ end }}
{{- if or (hasKey $networking "pods") (hasKey $networking "services") }}
# The shoot's pod network may reach its service network.
resource "kubectl_manifest" "shoot_networks" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "networking.k8s.io/v1"
    kind       = "NetworkPolicy"
    metadata   = { name = "shoot-networks", namespace = local.namespace, labels = local.labels }
    spec = {
      podSelector = {}
      policyTypes = [{{ if hasKey $networking "pods" }}"Ingress"{{ end }}{{ if and (hasKey $networking "pods") (hasKey $networking "services") }}, {{ end }}{{ if hasKey $networking "services" }}"Egress"{{ end }}]
      {{- if hasKey $networking "pods" }}
      ingress = [{ from = [{ ipBlock = { cidr = {{ tfvar "pods_cidr" $networking.pods }} } }] }]
      {{- end }}
      {{- if hasKey $networking "services" }}
      egress = [{ to = [{ ipBlock = { cidr = {{ tfvar "services_cidr" $networking.services }} } }] }]
      {{- end }}
    }
  })
}
{{- end }}
{{ if .infrastructure.sshPublicKey }}
resource "kubectl_manifest" "ssh_public_key" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Secret"
    type       = "Opaque"
    metadata   = { name = "ssh-publickey", namespace = local.namespace, labels = local.labels }
    data       = { "id_rsa.pub" = base64encode({{ tfvar "ssh_public_key" .infrastructure.sshPublicKey }}) }
  })
}
{{- end }}
