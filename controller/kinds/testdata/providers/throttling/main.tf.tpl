resource "terraform_data" "item" {
  count = {{ tfvar "items" .infrastructure.providerConfig.items }}
  input = {
    index = count.index
    token = sha256({{ .credentials.token }})
  }
}
{{ if hasKey .infrastructure.providerConfig "throttle" }}
# The cloud's answer to an account over its API rate.
resource "terraform_data" "throttled" {
  lifecycle {
    precondition {
      condition     = {{ tfvar "throttle" .infrastructure.providerConfig.throttle }} == ""
      error_message = {{ tfvar "throttle" .infrastructure.providerConfig.throttle }}
    }
  }
}
{{ end }}
output "items" {
  value = length(terraform_data.item)
}
