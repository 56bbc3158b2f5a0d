package executor

import (
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// notStartedError is a run that could not start for a reason the seed lifts by itself
// (a ResourceQuota full, no node for its pod yet): it is no failure of the operation. The
// Scheduler gives its slot back and starts it again a moment later; Reason says why it
// waits. It leaves no pod behind that could start without a slot, and no credentials: a
// pod the scheduler found no node for is deleted with its credentials Secret, and the
// next start creates it again.
type notStartedError struct {
	Reason string
}

func (e *notStartedError) Error() string { return "the run could not start yet: " + e.Reason }

// notStarted returns the run's notStartedError, if err is one.
func notStarted(err error) (*notStartedError, bool) {
	var ns *notStartedError
	ok := errors.As(err, &ns)
	return ns, ok
}

// refusedByQuota says whether the API server refused a create because a ResourceQuota of
// the namespace is used up, or has no usage counted yet.
func refusedByQuota(err error) bool {
	if !apierrors.IsForbidden(err) {
		return false
	}
	message := err.Error()
	return strings.Contains(message, "exceeded quota") || strings.Contains(message, "status unknown for quota")
}

// unschedulable returns the scheduler's message for a pod it found no node for.
func unschedulable(pod *corev1.Pod) (string, bool) {
	if pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName != "" {
		return "", false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}
