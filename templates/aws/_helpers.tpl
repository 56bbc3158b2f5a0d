{{- /* The terraform block and the aws provider of a kind's configuration. Called with a
dict: root (the template's data), region (the HCL of the region, a var. reference),
services (those an endpoint replaces besides sts), pathStyle (S3 by path). Static
credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; a workload identity
assumes its role with the token in a file. An endpoint (LocalStack) replaces the
services' endpoints and skips the checks only real AWS can answer. */ -}}
{{- define "aws.kindProvider" -}}
terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "5.100.0"
    }
  }
}

provider "aws" {
  region                      = {{ .region }}
  skip_credentials_validation = {{ .root.credentials.endpoint }} != ""
  skip_requesting_account_id  = {{ .root.credentials.endpoint }} != ""
  skip_metadata_api_check     = {{ .root.credentials.endpoint }} != ""
{{- if dig "pathStyle" false . }}
  s3_use_path_style = {{ .root.credentials.endpoint }} != ""
{{- end }}

  dynamic "endpoints" {
    for_each = {{ .root.credentials.endpoint }} == "" ? [] : [{{ .root.credentials.endpoint }}]
    content {
{{- range .services }}
      {{ . }} = endpoints.value
{{- end }}
      sts = endpoints.value
    }
  }
{{- if .root.workloadIdentity }}

  assume_role_with_web_identity {
    role_arn                = {{ .root.credentials.config.roleARN }}
    web_identity_token_file = {{ .root.credentials.token }}
  }
{{- end }}
}
{{- end -}}
