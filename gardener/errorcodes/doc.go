// Package errorcodes reads Gardener's error codes out of terraform's errors, apart from running terraform, so that the codes follow Gardener's rules and not the process that met the error.
package errorcodes
