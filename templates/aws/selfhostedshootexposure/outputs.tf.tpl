output "hostname" {
  value = aws_lb.exposure.dns_name
}
