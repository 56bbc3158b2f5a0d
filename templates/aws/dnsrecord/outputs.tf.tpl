output "zone" {
  value = aws_route53_record.record.zone_id
}
