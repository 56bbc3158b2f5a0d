package extension

import (
	"errors"
	"fmt"
	"time"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// Reasons of the Ready condition the framework itself gives.
const (
	reasonReconciled     = "Reconciled"
	ReasonProcessing     = "Processing"
	reasonMigrated       = "Migrated"
	reasonForceDeleted   = "ForceDeleted"
	reasonReconcileError = "ReconcileError"
	ReasonInvalid        = "InvalidConfiguration"
)

// Error is a failed operation with what the status needs: a condition reason, Gardener's
// error codes, and whether retrying without a change of input can help.
type Error struct {
	Reason string
	Codes  []extensionsv1alpha1.ErrorCode
	// Terminal errors are not retried until the object or an input it watches changes.
	Terminal bool
	// Invalid input fails the operation (state Failed) rather than erring it (state Error).
	Invalid bool
	// RetryAfter, when set, marks no failure: the operation must wait for something under
	// way (another run) and is tried again after this long, with the status untouched.
	RetryAfter time.Duration

	Err error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// InvalidInput is a terminal failure of input that can never succeed as it is; the
// message must name the field.
func InvalidInput(reason string, format string, args ...any) *Error {
	return &Error{
		Reason: reason, Terminal: true, Invalid: true,
		Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
		Err:   fmt.Errorf(format, args...),
	}
}

// asError turns any error of an actuator into an Error; unclassified errors are retried.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Reason: reasonReconcileError, Err: err}
}
