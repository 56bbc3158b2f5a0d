// Package templates holds the template engine and the providers it loads, and renders from a provider an Infrastructure's Terraform configuration and status, a ControlPlane's objects and the mutations of Gardener's control-plane Deployments.
package templates
