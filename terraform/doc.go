// Package terraform runs terraform for an Infrastructure so that no run can lose its state.
package terraform
