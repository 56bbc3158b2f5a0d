package infrastructure

import (
	"errors"
	"fmt"
	"time"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/errorcodes"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
)

// Reasons of the Ready condition; each failure carries one.
const (
	ReasonInvalidConfiguration   = extension.ReasonInvalid
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	ReasonTerraformFailed        = "TerraformFailed"
	ReasonRunInProgress          = "RunInProgress"
	ReasonStateTooLarge          = "StateTooLarge"
	// ReasonStateLost stops a deletion whose state lost resources that no history holds.
	ReasonStateLost = "StateLost"
)

func credentialsUnavailable(format string, args ...any) *extension.Error {
	return &extension.Error{
		Reason:   ReasonCredentialsUnavailable,
		Codes:    []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
		Terminal: true,
		Err:      fmt.Errorf(format, args...),
	}
}

// retryAfterRunInProgress is how long a reconcile waits for a run another reconcile
// started; the run writes its outcome itself.
const retryAfterRunInProgress = 10 * time.Second

// classify turns the errors of templates and terraform into the framework's Error.
func classify(err error) error {
	var validationErr *templates.ValidationError
	var runErr *run.Error
	var pending *runPendingError
	switch {
	case err == nil:
		return nil
	case errors.As(err, new(*extension.Error)):
		return err
	case errors.As(err, &pending):
		return &extension.Error{Reason: ReasonRunInProgress, RetryAfter: pending.recheck(), Err: err}
	case errors.As(err, &validationErr):
		return &extension.Error{Reason: ReasonInvalidConfiguration, Codes: validationErr.Codes(), Terminal: true, Invalid: true, Err: err}
	case errors.Is(err, run.ErrRunInProgress):
		return &extension.Error{Reason: ReasonRunInProgress, RetryAfter: retryAfterRunInProgress, Err: err}
	case errors.Is(err, run.ErrInvalidInput):
		return &extension.Error{Reason: ReasonTerraformFailed, Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}, Terminal: true, Err: err}
	case errors.As(err, &runErr):
		codes := errorcodes.Classify(runErr.Blocks)
		return &extension.Error{Reason: ReasonTerraformFailed, Codes: codes, Terminal: !errorcodes.Retryable(codes), Err: err}
	default:
		return err
	}
}
