// Package infrastructure reconciles Infrastructure objects by rendering a provider's templates and running terraform.
package infrastructure
