resource "terraform_data" "entry" {
  input = {
    bucket = {{ tfvar "bucket_name" .object.spec.bucketName }}
    token  = sha256({{ .credentials.token }})
  }
}

output "region" {
  value = {{ tfvar "region" .object.spec.region }}
}
