# `resources` ConfigMaps, each named after the id terraform generates for a terraform_data
# when it creates it: a state entry lost by a killed run shows up as a second ConfigMap of
# the same index rather than being adopted again.
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
  cluster    = local.kubeconfig.clusters[0].cluster
  user       = try(local.kubeconfig.users[0].user, {})
}

provider "kubectl" {
  load_config_file       = false
  host                   = local.cluster.server
  cluster_ca_certificate = try(base64decode(local.cluster["certificate-authority-data"]), null)
  client_certificate     = try(base64decode(local.user["client-certificate-data"]), null)
  client_key             = try(base64decode(local.user["client-key-data"]), null)
}

resource "terraform_data" "id" {
  count = var.resources
}

resource "kubectl_manifest" "item" {
  count = var.resources
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "item-${count.index}-${terraform_data.id[count.index].id}"
      namespace = var.namespace
      labels    = { "terraseed-e2e" = "item" }
    }
    data = { index = tostring(count.index) }
  })
}

output "names" {
  value = kubectl_manifest.item[*].name
}
