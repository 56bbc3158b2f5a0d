package infrastructure

import (
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/errorcodes"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
)

// ReasonThrottled is the reason of an operation that failed because the cloud throttled
// its calls, and of the event that says its account's runs back off.
const ReasonThrottled = "Throttled"

// withFleet sets what the scheduler shares the seed's runs by: the budget key of the
// provider, the region and the project of the credentials Secret's namespace (never the
// credentials' values, which the shoot's owner writes), the shoot project, how the
// provider's throttling reads, and the provider's parallelism.
func (op *operation) withFleet(req run.Request, provider *templates.Provider) run.Request {
	req.Budget = provider.AccountKey(op.infra.Spec.Region, projectOf(secretKeyOf(op.infra).Namespace))
	req.Project = projectOf(op.infra.Namespace)
	req.Parallelism = provider.Parallelism()
	req.Throttled = func(err error) bool { return throttled(provider, err) }
	return req
}

// throttled says whether a run failed because the cloud throttled its calls.
func throttled(provider *templates.Provider, err error) bool {
	var runErr *run.Error
	return errors.As(err, &runErr) && (errorcodes.Throttled(runErr.Blocks) || provider.Throttled(runErr.Blocks))
}

// throttledError is a throttled run's failure with Gardener's rate-limit code, which
// is retried, also where only the provider's own pattern matched it.
func throttledError(provider *templates.Provider, err error) error {
	var runErr *run.Error
	if !throttled(provider, err) || !errors.As(err, &runErr) {
		return err
	}
	codes := errorcodes.Classify(runErr.Blocks)
	if !slices.Contains(codes, extensionsv1alpha1.ErrorInfraRateLimitsExceeded) {
		codes = append(codes, extensionsv1alpha1.ErrorInfraRateLimitsExceeded)
	}
	return &extension.Error{Reason: ReasonThrottled, Codes: codes, Terminal: !errorcodes.Retryable(codes), Err: err}
}

// projectOf is the Gardener project of a shoot namespace, shoot--<project>--<name>; any
// other namespace is a project of its own.
func projectOf(namespace string) string {
	rest, ok := strings.CutPrefix(namespace, "shoot--")
	if !ok {
		return namespace
	}
	project, _, ok := strings.Cut(rest, "--")
	if !ok || project == "" {
		return namespace
	}
	return project
}

// throttledEvent tells on the Infrastructure whose run the cloud throttled that its
// account's runs back off; the account is not named, its key is in the metrics.
func throttledEvent(recorder events.EventRecorder) func(run.ID, run.Backoff) {
	return func(id run.ID, backoff run.Backoff) {
		if recorder == nil {
			return
		}
		infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: id.Name, UID: id.UID}}
		infra.SetGroupVersionKind(extensionsv1alpha1.GroupVersion.WithKind("Infrastructure"))
		recorder.Eventf(infra, nil, corev1.EventTypeWarning, ReasonThrottled, "Run",
			"the cloud throttled the calls of this Infrastructure's account: its runs in this region now go %d at a time, none starting for %s",
			backoff.Slots, backoff.Pause)
	}
}
