// Package infrastructure reconciles Infrastructures, and the kinds a provider serves from templates besides them, by rendering its templates and running terraform, a file per operation (apply, drift, delete, migrate).
package infrastructure
