# Generated: values come from terraform.tfvars.json, credentials from TF_VAR_ environment variables.

variable "infrastructure_name" {
  type = string
}

variable "network_cidr" {
  type = string
}

variable "owned_namespace" {
  type = string
}

variable "owner" {
  type = string
}

variable "owner_uid" {
  type = string
}

variable "shoot_namespace" {
  type = string
}

variable "zone_0_name" {
  type = string
}

variable "zone_0_workers" {
  type = string
}

variable "zone_1_name" {
  type = string
}

variable "zone_1_workers" {
  type = string
}

variable "kubeconfig" {
  type      = string
  sensitive = true
}
