resource "terraform_data" "infrastructure" {}
