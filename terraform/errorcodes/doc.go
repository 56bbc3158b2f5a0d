// Package errorcodes maps terraform's errors to Gardener's error codes outside the process that ran
// terraform, so that which failures are retried is the controller's decision.
package errorcodes
