resource "terraform_data" "bucket" {
  input = {{ tfvar "bucket_name" .object.metadata.name }}
}

output "bucket_name" {
  value = terraform_data.bucket.output
}

# The bucket's own key, derived from the credentials that made it.
output "bucket_token" {
  value     = sha256("${terraform_data.bucket.output}/${ {{ .credentials.token }} }")
  sensitive = true
}
