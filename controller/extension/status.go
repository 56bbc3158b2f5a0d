package extension

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// ConditionReady tells whether what the object describes exists as specified.
const ConditionReady extensionsv1alpha1.ConditionType = "Ready"

// Progress of lastOperation as Gardener reports it: started, failed half-way, done.
const (
	progressStarted   = 1
	progressError     = 50
	progressSucceeded = 100
)

func setProcessing(status *extensionsv1alpha1.DefaultStatus, op extensionsv1alpha1.LastOperationType, description string, now metav1.Time) {
	setLastOperation(status, op, extensionsv1alpha1.LastOperationStateProcessing, progressStarted, description, now)
	setReady(status, extensionsv1alpha1.ConditionProgressing, ReasonProcessing, description, nil, now)
}

func setSucceeded(status *extensionsv1alpha1.DefaultStatus, op extensionsv1alpha1.LastOperationType, description, reason string, now metav1.Time) {
	setLastOperation(status, op, extensionsv1alpha1.LastOperationStateSucceeded, progressSucceeded, description, now)
	status.LastError = nil
	setReady(status, extensionsv1alpha1.ConditionTrue, reason, description, nil, now)
}

func setFailure(status *extensionsv1alpha1.DefaultStatus, op extensionsv1alpha1.LastOperationType, opErr *Error, now metav1.Time) {
	state := extensionsv1alpha1.LastOperationStateError
	if opErr.Invalid {
		state = extensionsv1alpha1.LastOperationStateFailed
	}
	setLastOperation(status, op, state, progressError, opErr.Error(), now)
	status.LastError = &extensionsv1alpha1.LastError{
		Description:    opErr.Error(),
		TaskID:         ptr(string(op)),
		Codes:          slices.Clone(opErr.Codes),
		LastUpdateTime: &now,
	}
	setReady(status, extensionsv1alpha1.ConditionFalse, opErr.Reason, opErr.Error(), opErr.Codes, now)
}

func setLastOperation(status *extensionsv1alpha1.DefaultStatus, op extensionsv1alpha1.LastOperationType, state extensionsv1alpha1.LastOperationState, progress int32, description string, now metav1.Time) {
	status.LastOperation = &extensionsv1alpha1.LastOperation{
		Type: op, State: state, Progress: progress, Description: description, LastUpdateTime: now,
	}
}

// setReady updates the Ready condition, moving its transition time only when its status changes.
func setReady(status *extensionsv1alpha1.DefaultStatus, conditionStatus extensionsv1alpha1.ConditionStatus, reason, message string, codes []extensionsv1alpha1.ErrorCode, now metav1.Time) {
	SetCondition(status, extensionsv1alpha1.Condition{
		Type: ConditionReady, Status: conditionStatus, Reason: reason, Message: message,
		Codes: slices.Clone(codes), LastUpdateTime: now, LastTransitionTime: now,
	})
}

// SetCondition adds or replaces the condition of its type, keeping the transition time of
// an existing one whose status stays the same.
func SetCondition(status *extensionsv1alpha1.DefaultStatus, condition extensionsv1alpha1.Condition) {
	existing := FindCondition(status, condition.Type)
	if existing == nil {
		status.Conditions = append(status.Conditions, condition)
		return
	}
	if existing.Status == condition.Status {
		condition.LastTransitionTime = existing.LastTransitionTime
	}
	*existing = condition
}

// FindCondition returns the condition of the type in status, nil when there is none.
func FindCondition(status *extensionsv1alpha1.DefaultStatus, t extensionsv1alpha1.ConditionType) *extensionsv1alpha1.Condition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
