# The provider of the chained configuration; the test writes the resources themselves
# (resources.tf): pairs of a terraform_data, whose id terraform generates when it creates
# it, and a ConfigMap named after that id, each pair depending on the one before so that
# terraform creates them interleaved, one at a time. A state entry lost by a killed run
# shows up as a second ConfigMap of the pair rather than being adopted again.
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
  user       = local.kubeconfig.users[0].user
}

provider "kubectl" {
  load_config_file       = false
  host                   = local.cluster.server
  cluster_ca_certificate = base64decode(local.cluster["certificate-authority-data"])
  client_certificate     = base64decode(local.user["client-certificate-data"])
  client_key             = base64decode(local.user["client-key-data"])
}
