// Package infrastructure reconciles Infrastructure objects by rendering a provider's templates and
// running terraform, a file per operation (apply, drift, delete, migrate).
package infrastructure
