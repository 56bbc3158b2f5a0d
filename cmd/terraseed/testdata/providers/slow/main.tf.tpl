locals {
  kubeconfig = {{ .credentials.kubeconfig }}
}

resource "terraform_data" "first" {
  input = "first"
}

resource "terraform_data" "slow" {
  depends_on = [terraform_data.first]
  provisioner "local-exec" {
    command = "sleep 60"
  }
}
