{{- /* A SelfHostedShootExposure is, in a Kubernetes cluster, what Gardener's local
provider makes of it: a Service without selector on the API server's port, and per IP
family an EndpointSlice of the Service over the control-plane nodes' InternalIP
addresses (of the endpoints given, as gardenlet lists the healthy ones). Clients in the
cluster reach the API servers by the Service's name. The Service is of type ClusterIP:
a local cluster has no load balancer to give it an address outside. */ -}}
{{- $spec := .object.spec -}}
{{- $addresses := list -}}
{{- range $spec.endpoints -}}
{{- $node := .nodeName -}}
{{- range .addresses -}}
{{- if eq .type "InternalIP" -}}
{{- $addresses = append $addresses (dict "nodeName" $node "ip" .address) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{ template "local.terraform" . }}
locals {
  namespace = {{ tfvar "owned_namespace" (printf "exposure-%s" (printf "%s/%s" .object.metadata.namespace .object.metadata.name | sha256sum | trunc 40)) }}
  port      = {{ tfvar "port" $spec.port }}
  labels = {
    "app.kubernetes.io/managed-by" = "terraseed"
    "app.kubernetes.io/name"       = "selfhostedshootexposure"
  }
  # The nodes' InternalIP addresses by IP family: a slice holds addresses of one family.
  addresses = {
    IPv4 = [for a in {{ tfvar "addresses" $addresses }} : a if !strcontains(a.ip, ":")]
    IPv6 = [for a in var.addresses : a if strcontains(a.ip, ":")]
  }
}

# The namespace is this object's alone: its label terraseed.io/owner-uid names the UID of
# the object, its annotation terraseed.io/owner the object's kind and key; the controller
# refuses another object that names it (owned_namespace).
resource "kubectl_manifest" "namespace" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Namespace"
    metadata = {
      name        = local.namespace
      labels      = merge(local.labels, { "terraseed.io/owner-uid" = {{ tfvar "owner_uid" .object.metadata.uid }} })
      annotations = { "terraseed.io/owner" = {{ tfvar "owner" (printf "SelfHostedShootExposure %s/%s" .object.metadata.namespace .object.metadata.name) }} }
    }
  })
}

# No selector: the Service's endpoints are the slices below, not pods.
resource "kubectl_manifest" "service" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Service"
    metadata   = { name = "kube-apiserver", namespace = local.namespace, labels = local.labels }
    spec = {
      type  = "ClusterIP"
      ports = [{ name = "kube-apiserver", port = local.port, targetPort = local.port, protocol = "TCP" }]
    }
  })
}

resource "kubectl_manifest" "endpoints" {
  for_each   = { for family, addresses in local.addresses : family => addresses if length(addresses) > 0 }
  depends_on = [kubectl_manifest.service]
  yaml_body = yamlencode({
    apiVersion  = "discovery.k8s.io/v1"
    kind        = "EndpointSlice"
    metadata    = {
      name      = "kube-apiserver-${lower(each.key)}"
      namespace = local.namespace
      labels    = merge(local.labels, { "kubernetes.io/service-name" = "kube-apiserver", "endpointslice.kubernetes.io/managed-by" = "terraseed" })
    }
    addressType = each.key
    ports       = [{ name = "kube-apiserver", port = local.port, protocol = "TCP" }]
    endpoints   = [for a in each.value : { addresses = [a.ip], nodeName = a.nodeName, conditions = { ready = true } }]
  })
}
