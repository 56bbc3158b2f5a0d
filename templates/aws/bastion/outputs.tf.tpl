output "ip" {
  value = aws_instance.bastion.public_ip
}

output "hostname" {
  value = aws_instance.bastion.public_dns
}
