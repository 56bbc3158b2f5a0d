// Package templates renders a provider's Terraform configuration from an Infrastructure: providers are directories of templates, a schema and an output mapping.
package templates
