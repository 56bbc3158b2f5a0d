# The test configuration: `resources` ConfigMaps, each named after the id terraform
# generates for a terraform_data. (The kill test uses testdata/chain, which creates each
# id and its ConfigMap in turn.)
terraform {
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "1.19.0"
    }
  }
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

resource "terraform_data" "id" {
  count = var.resources
}

resource "kubectl_manifest" "item" {
  count = var.resources
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "item-${terraform_data.id[count.index].id}"
      namespace = var.namespace
      labels    = { "terraseed-test" = "item" }
    }
    data = { index = tostring(count.index) }
  })
}
