{{- /* A bastion is a namespace with a pod that gets the user data, a Service for SSH,
and NetworkPolicies that let SSH in from the ingress blocks only. */ -}}
{{- $spec := .object.spec -}}
{{- $config := dig "providerConfig" dict $spec -}}
{{ template "local.terraform" . }}
locals {
  namespace = {{ tfvar "owned_namespace" (printf "bastion-%s" (printf "%s/%s" .object.metadata.namespace .object.metadata.name | sha256sum | trunc 40)) }}
  labels = {
    "app.kubernetes.io/managed-by" = "terraseed"
    "app.kubernetes.io/name"       = "bastion"
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
      annotations = { "terraseed.io/owner" = {{ tfvar "owner" (printf "Bastion %s/%s" .object.metadata.namespace .object.metadata.name) }} }
    }
  })
}

resource "kubectl_manifest" "user_data" {
  depends_on     = [kubectl_manifest.namespace]
  sensitive_fields = ["data"]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Secret"
    type       = "Opaque"
    metadata   = { name = "user-data", namespace = local.namespace, labels = local.labels }
    data       = { "user-data" = {{ tfvar "user_data" $spec.userData }} }
  })
}

resource "kubectl_manifest" "pod" {
  depends_on = [kubectl_manifest.user_data]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Pod"
    metadata   = { name = "bastion", namespace = local.namespace, labels = local.labels }
    spec = {
      automountServiceAccountToken = false
      containers = [{
        name         = "bastion"
        image        = {{ tfvar "image" (dig "image" "registry.k8s.io/pause:3.10" $config) }}
        ports        = [{ name = "ssh", containerPort = 22 }]
        volumeMounts = [{ name = "user-data", mountPath = "/etc/bastion", readOnly = true }]
      }]
      volumes = [{ name = "user-data", secret = { secretName = "user-data" } }]
    }
  })
}

resource "kubectl_manifest" "service" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Service"
    metadata   = { name = "bastion", namespace = local.namespace, labels = local.labels }
    spec = {
      selector = local.labels
      ports    = [{ name = "ssh", port = 22, targetPort = "ssh" }]
    }
  })
}

# Nothing reaches the bastion but SSH from the ingress blocks.
resource "kubectl_manifest" "deny_all" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "networking.k8s.io/v1"
    kind       = "NetworkPolicy"
    metadata   = { name = "deny-all", namespace = local.namespace, labels = local.labels }
    spec       = { podSelector = {}, policyTypes = ["Ingress"] }
  })
}

resource "kubectl_manifest" "ssh" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "networking.k8s.io/v1"
    kind       = "NetworkPolicy"
    metadata   = { name = "ssh", namespace = local.namespace, labels = local.labels }
    spec = {
      podSelector = { matchLabels = local.labels }
      policyTypes = ["Ingress"]
      ingress = [{
        ports = [{ port = 22, protocol = "TCP" }]
        from  = [for block in {{ tfvar "ingress" $spec.ingress }} : { ipBlock = block.ipBlock }]
      }]
    }
  })
}
