terraform {
  required_version = ">= 1.5"
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "1.19.0"
    }
  }
}

# The kubeconfig arrives as a sensitive variable; the machine's own ~/.kube/config is never read.
locals {
  kubeconfig = yamldecode(var.kubeconfig)
  context    = one([for c in local.kubeconfig.contexts : c.context if c.name == local.kubeconfig["current-context"]])
  cluster    = one([for c in local.kubeconfig.clusters : c.cluster if c.name == local.context.cluster])
  user       = one([for u in local.kubeconfig.users : u.user if u.name == local.context.user])

  namespace = var.owned_namespace
  labels = {
    "app.kubernetes.io/managed-by"      = "terraseed"
    "infrastructure.terraseed.io/name"  = var.infrastructure_name
    "infrastructure.terraseed.io/shoot" = var.shoot_namespace
  }
}

provider "kubectl" {
  load_config_file       = false
  host                   = local.cluster.server
  cluster_ca_certificate = try(base64decode(local.cluster["certificate-authority-data"]), null)
  client_certificate     = try(base64decode(local.user["client-certificate-data"]), null)
  client_key             = try(base64decode(local.user["client-key-data"]), null)
  token                  = try(local.user.token, null)
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
      labels      = merge(local.labels, { "terraseed.io/owner-uid" = var.owner_uid })
      annotations = { "terraseed.io/owner" = var.owner }
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

# Zone 0: pods in the zone talk to the zone's worker network.
resource "kubectl_manifest" "zone_0" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "networking.k8s.io/v1"
    kind       = "NetworkPolicy"
    metadata   = { name = "zone-0", namespace = local.namespace, labels = local.labels }
    spec = {
      podSelector = { matchLabels = { "topology.kubernetes.io/zone" = var.zone_0_name } }
      policyTypes = ["Ingress", "Egress"]
      ingress     = [{ from = [{ ipBlock = { cidr = var.zone_0_workers } }] }]
      egress      = [{ to = [{ ipBlock = { cidr = var.zone_0_workers } }] }]
    }
  })
}


resource "kubectl_manifest" "ssh_public_key" {
  depends_on = [kubectl_manifest.namespace]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "Secret"
    type       = "Opaque"
    metadata   = { name = "ssh-publickey", namespace = local.namespace, labels = local.labels }
    data       = { "id_rsa.pub" = base64encode(var.ssh_public_key) }
  })
}
