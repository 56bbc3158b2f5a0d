package kinds

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/run"
)

// The gauges below are kept per Infrastructure, labelled by its namespace and name: what
// they tell (which one fails, drifted, outgrows the status) is about one object, and an
// alert must name it. A seed of 1000 Infrastructures makes a few thousand series, one
// each for the drift state and the state size and one per command run; every series of
// an Infrastructure is deleted when it is gone (Actuator.Forget), so that they do not
// accumulate as shoots come and go. The labels are not "namespace" and "name", which
// the scrape's own namespace label would rename.
var (
	infrastructureLabels = []string{"infrastructure_namespace", "infrastructure_name"}

	failedRuns = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terraseed_infrastructure_failed_runs",
		Help: "Terraform runs of an Infrastructure that failed in a row, by command; 0 once one succeeds.",
	}, append(slices.Clone(infrastructureLabels), "command"))
	driftState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terraseed_infrastructure_drift_state",
		Help: "1 for what the InfrastructureInSync condition of an Infrastructure says: in_sync, drifted (a plan found changes to make) or check_failed; one series per Infrastructure, none without drift checks.",
	}, append(slices.Clone(infrastructureLabels), "state"))
	stateBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terraseed_infrastructure_state_bytes",
		Help: "Bytes the terraform state of an Infrastructure takes encoded in .status.state (compressed), as of its last apply or migration; above terraseed_infrastructure_state_limit_bytes it is left out of the status.",
	}, infrastructureLabels)
	stateLimitBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "terraseed_infrastructure_state_limit_bytes",
		Help: "Bytes .status.state may take at most.",
	})
)

// Values of the state label of terraseed_infrastructure_drift_state.
const (
	driftInSync      = "in_sync"
	driftDrifted     = "drifted"
	driftCheckFailed = "check_failed"
)

func init() {
	metrics.Registry.MustRegister(failedRuns, driftState, stateBytes, stateLimitBytes)
	stateLimitBytes.Set(maxStatusState)
}

// recordDrift publishes what the InfrastructureInSync condition says, or removes the
// series when there is no such condition.
func recordDrift(infra *extensionsv1alpha1.Infrastructure) {
	key := prometheus.Labels{"infrastructure_namespace": infra.Namespace, "infrastructure_name": infra.Name}
	state := ""
	if c := extension.FindCondition(&infra.Status.DefaultStatus, ConditionInSync); c != nil {
		switch c.Status {
		case extensionsv1alpha1.ConditionTrue:
			state = driftInSync
		case extensionsv1alpha1.ConditionFalse:
			state = driftDrifted
		default:
			state = driftCheckFailed
		}
	}
	for _, s := range []string{driftInSync, driftDrifted, driftCheckFailed} {
		if s != state {
			driftState.DeleteLabelValues(infra.Namespace, infra.Name, s)
		}
	}
	if state != "" {
		key["state"] = state
		driftState.With(key).Set(1)
	}
}

// recordStateSize publishes the size of the encoded .status.state of an object whose kind
// keeps per-object gauges.
func recordStateSize(kind *kindSpec, obj client.Object, size int) {
	if kind.objectMetrics {
		stateBytes.WithLabelValues(obj.GetNamespace(), obj.GetName()).Set(float64(size))
	}
}

// forgetMetrics deletes every series of an Infrastructure.
func forgetMetrics(key client.ObjectKey) {
	labels := prometheus.Labels{"infrastructure_namespace": key.Namespace, "infrastructure_name": key.Name}
	failedRuns.DeletePartialMatch(labels)
	driftState.DeletePartialMatch(labels)
	stateBytes.DeletePartialMatch(labels)
}

// countFailures counts the runs of an Infrastructure that failed in a row, by command.
func countFailures(req run.Request, err error) {
	if req.ID.Purpose != run.PurposeInfra {
		return
	}
	failures := failedRuns.WithLabelValues(req.ID.Namespace, req.ID.Name, string(req.Command))
	if err != nil {
		failures.Inc()
	} else {
		failures.Set(0)
	}
}
