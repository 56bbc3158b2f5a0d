# Generated: values come from terraform.tfvars.json, credentials from TF_VAR_ environment variables.

variable "cluster_name" {
  type = string
}

variable "ignore_tags_key_prefixes" {
  type = list(string)
}

variable "ignore_tags_keys" {
  type = list(string)
}

variable "nodes_cidr" {
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

variable "zone_1_elastic_ip_allocation_id" {
  type = string
}

variable "zone_1_internal" {
  type = string
}

variable "zone_1_name" {
  type = string
}

variable "zone_1_public" {
  type = string
}

variable "zone_1_workers" {
  type = string
}

variable "zone_2_internal" {
  type = string
}

variable "zone_2_name" {
  type = string
}

variable "zone_2_public" {
  type = string
}

variable "zone_2_workers" {
  type = string
}

variable "endpoint" {
  type      = string
  sensitive = false
  default   = ""
}
