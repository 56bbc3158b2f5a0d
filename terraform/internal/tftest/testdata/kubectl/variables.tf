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

# A benchmark changes every object in place by changing the revision.
variable "revision" {
  type    = string
  default = ""
}
