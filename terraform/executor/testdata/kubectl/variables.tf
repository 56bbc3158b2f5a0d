variable "kubeconfig" {
  type      = string
  sensitive = true
}

variable "namespace" {
  type = string
}

variable "resources" {
  type    = number
  default = 20
}
