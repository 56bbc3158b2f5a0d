resource "terraform_data" "broken" {
  input = "unterminated
}
