output "bucket_name" {
  value = kubectl_manifest.bucket.name
}

output "region" {
  value = var.region
}
