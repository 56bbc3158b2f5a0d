package infrastructure

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// ConditionReady tells whether the infrastructure exists as specified.
const ConditionReady extensionsv1alpha1.ConditionType = "Ready"

func setProcessing(infra *extensionsv1alpha1.Infrastructure, op extensionsv1alpha1.LastOperationType, description string, now metav1.Time) {
	setLastOperation(infra, op, extensionsv1alpha1.LastOperationStateProcessing, 1, description, now)
	setReady(infra, extensionsv1alpha1.ConditionProgressing, ReasonProcessing, description, nil, now)
}

func setSucceeded(infra *extensionsv1alpha1.Infrastructure, op extensionsv1alpha1.LastOperationType, description, reason string, now metav1.Time) {
	setLastOperation(infra, op, extensionsv1alpha1.LastOperationStateSucceeded, 100, description, now)
	infra.Status.LastError = nil
	setReady(infra, extensionsv1alpha1.ConditionTrue, reason, description, nil, now)
}

func setFailure(infra *extensionsv1alpha1.Infrastructure, op extensionsv1alpha1.LastOperationType, opErr *operationError, now metav1.Time) {
	state := extensionsv1alpha1.LastOperationStateError
	if opErr.invalid {
		state = extensionsv1alpha1.LastOperationStateFailed
	}
	progress := int32(1)
	if infra.Status.LastOperation != nil {
		progress = infra.Status.LastOperation.Progress
	}
	setLastOperation(infra, op, state, progress, opErr.Error(), now)
	infra.Status.LastError = &extensionsv1alpha1.LastError{
		Description:    opErr.Error(),
		TaskID:         ptr(string(op)),
		Codes:          slices.Clone(opErr.codes),
		LastUpdateTime: &now,
	}
	setReady(infra, extensionsv1alpha1.ConditionFalse, opErr.reason, opErr.Error(), opErr.codes, now)
}

func setLastOperation(infra *extensionsv1alpha1.Infrastructure, op extensionsv1alpha1.LastOperationType, state extensionsv1alpha1.LastOperationState, progress int32, description string, now metav1.Time) {
	infra.Status.LastOperation = &extensionsv1alpha1.LastOperation{
		Type: op, State: state, Progress: progress, Description: description, LastUpdateTime: now,
	}
}

// setReady updates the Ready condition, moving its transition time only when its status changes.
func setReady(infra *extensionsv1alpha1.Infrastructure, status extensionsv1alpha1.ConditionStatus, reason, message string, codes []extensionsv1alpha1.ErrorCode, now metav1.Time) {
	condition := extensionsv1alpha1.Condition{
		Type: ConditionReady, Status: status, Reason: reason, Message: message,
		Codes: slices.Clone(codes), LastUpdateTime: now, LastTransitionTime: now,
	}
	for i, existing := range infra.Status.Conditions {
		if existing.Type != ConditionReady {
			continue
		}
		if existing.Status == status {
			condition.LastTransitionTime = existing.LastTransitionTime
		}
		infra.Status.Conditions[i] = condition
		return
	}
	infra.Status.Conditions = append(infra.Status.Conditions, condition)
}

func ptr[T any](v T) *T { return &v }
