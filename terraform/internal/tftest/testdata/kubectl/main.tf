# The test configuration: `resources` ConfigMaps, each named after the id terraform
# generates for a terraform_data. (The kill test writes its own main.tf, which creates
# each id and its ConfigMap in turn.)
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
    data = { index = tostring(count.index), revision = var.revision }
  })
}
