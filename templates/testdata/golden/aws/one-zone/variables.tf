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

variable "endpoint" {
  type      = string
  sensitive = false
  default   = ""
}
