// Package providers is the provider model: it loads and checks a provider directory
// (provider.yaml, the providerConfig schema, Terraform and control-plane templates,
// mutations.yaml) and renders from it an Infrastructure's Terraform configuration and status,
// a ControlPlane's objects and the mutations of Gardener's control-plane Deployments.
package providers
