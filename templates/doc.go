// Package templates is the provider model: it loads and checks a provider directory
// (provider.yaml, the providerConfig schema, Terraform and control-plane templates, and
// mutations.yaml, whose model is templates/mutations) and renders from it an
// Infrastructure's Terraform configuration and status and a ControlPlane's objects.
package templates
