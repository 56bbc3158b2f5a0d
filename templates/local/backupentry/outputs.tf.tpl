output "prefix" {
  value = var.prefix
}
