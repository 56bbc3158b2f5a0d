// Package codegen proves that `make verify` catches generated files that are out of date.
package codegen
