# Generated: values come from terraform.tfvars.json, credentials from TF_VAR_ environment variables.

variable "cluster_name" {
  type = string
}

variable "region" {
  type = string
}

variable "ssh_public_key" {
  type = string
}

variable "vpc_cidr" {
  type = string
}

variable "zone_0_internal" {
  type = string
}

variable "zone_0_name" {
  type = string
}

variable "zone_0_public" {
  type = string
}

variable "zone_0_workers" {
  type = string
}

variable "web_identity_token_file" {
  type      = string
  sensitive = false
}

variable "role_arn" {
  type      = string
  sensitive = false
}

variable "endpoint" {
  type      = string
  sensitive = false
  default   = ""
}
