package infrastructure

import (
	"errors"
	"fmt"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform"
)

// Reasons of the Ready condition; each failure carries one.
const (
	ReasonReconciled             = "Reconciled"
	ReasonProcessing             = "Processing"
	ReasonInvalidConfiguration   = "InvalidConfiguration"
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	ReasonTerraformFailed        = "TerraformFailed"
	ReasonRunInProgress          = "RunInProgress"
	ReasonMigrated               = "Migrated"
	ReasonWaitingForState        = "WaitingForState"
	ReasonReconcileError         = "ReconcileError"
)

// operationError is a failed operation with what the status needs: a condition reason,
// Gardener's error codes, and whether retrying without a change of input can help.
type operationError struct {
	reason string
	codes  []extensionsv1alpha1.ErrorCode
	// terminal errors are not retried until the Infrastructure or its secret changes.
	terminal bool
	// invalid input fails the operation (state Failed) rather than erring it (state Error).
	invalid bool
	err     error
}

func (e *operationError) Error() string { return e.err.Error() }
func (e *operationError) Unwrap() error { return e.err }

func credentialsUnavailable(format string, args ...any) *operationError {
	return &operationError{
		reason:   ReasonCredentialsUnavailable,
		codes:    []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
		terminal: true,
		err:      fmt.Errorf(format, args...),
	}
}

// classify turns any error of an operation into an operationError.
func classify(err error) *operationError {
	var opErr *operationError
	if errors.As(err, &opErr) {
		return opErr
	}
	var validationErr *templates.ValidationError
	if errors.As(err, &validationErr) {
		return &operationError{reason: ReasonInvalidConfiguration, codes: validationErr.Codes(), terminal: true, invalid: true, err: err}
	}
	if errors.Is(err, terraform.ErrRunInProgress) {
		return &operationError{reason: ReasonRunInProgress, err: err}
	}
	var runErr *terraform.RunError
	if errors.As(err, &runErr) {
		return &operationError{reason: ReasonTerraformFailed, codes: runErr.Codes, terminal: !runErr.Retryable, err: err}
	}
	return &operationError{reason: ReasonReconcileError, err: err}
}
