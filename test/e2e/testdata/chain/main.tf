# The provider and variables of a chain configuration; the test writes the chain itself
# (chain.tf): pairs of a terraform_data, whose id terraform generates when it creates it,
# and a ConfigMap named after that id, each pair depending on the one before, so that
# terraform creates them one after the other, each ConfigMap right after its id.
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
