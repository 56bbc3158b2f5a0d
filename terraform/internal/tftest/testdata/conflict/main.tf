# Applies a field that another field manager owns, without forcing: the API server
# refuses with a conflict.
terraform {
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "1.19.0"
    }
  }
}

variable "kubeconfig" {
  type      = string
  sensitive = true
}

variable "namespace" {
  type = string
}

variable "resources" {
  type = number
}

locals {
  kubeconfig = yamldecode(var.kubeconfig)
}

provider "kubectl" {
  load_config_file       = false
  host                   = local.kubeconfig.clusters[0].cluster.server
  cluster_ca_certificate = base64decode(local.kubeconfig.clusters[0].cluster["certificate-authority-data"])
  client_certificate     = base64decode(local.kubeconfig.users[0].user["client-certificate-data"])
  client_key             = base64decode(local.kubeconfig.users[0].user["client-key-data"])
}

resource "kubectl_manifest" "taken" {
  server_side_apply = true
  force_conflicts   = false
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata   = { name = "taken", namespace = var.namespace }
    data       = { owner = "terraform" }
  })
}
