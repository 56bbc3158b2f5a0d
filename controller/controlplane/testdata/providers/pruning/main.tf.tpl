resource "terraform_data" "nothing" {}
