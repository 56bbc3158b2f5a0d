package kinds

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
)

// ConditionInSync says whether the last periodic plan found the infrastructure as
// configured; it names the resources that drifted.
const ConditionInSync extensionsv1alpha1.ConditionType = "InfrastructureInSync"

// Reasons of the InfrastructureInSync condition.
const (
	reasonApplied     = "Applied"
	ReasonInSync      = "NoChanges"
	ReasonDrifted     = "Drifted"
	reasonCheckFailed = "CheckFailed"
)

// Verify plans, without applying, about every DriftInterval, and records in the
// InfrastructureInSync condition whether the infrastructure still matches its
// configuration. Each Infrastructure's plans fall at its own point of the interval (see
// nextDriftCheck), so that a seed's plans spread over it, also after a restart.
func (a *Actuator) Verify(ctx context.Context, req extension.Request[*extensionsv1alpha1.Infrastructure]) time.Duration {
	return a.verify(ctx, requestOf(infrastructureKind, req))
}

func (a *Actuator) verify(ctx context.Context, req request) time.Duration {
	infra := req.Object.(*extensionsv1alpha1.Infrastructure)
	// What an earlier process recorded, before this one's first apply or plan; with or
	// without drift checks.
	if infra.Status.State != nil {
		recordStateSize(infrastructureKind, infra, len(infra.Status.State.Raw))
	}
	if a.DriftInterval <= 0 {
		return 0
	}
	status := &infra.Status.DefaultStatus
	now := time.Now()
	recordDrift(infra)
	if !a.planKnown(infra) {
		if wait := a.nextDriftCheck(infra, now).Sub(now); wait > 0 {
			return wait
		}
	}
	op := a.operation(req)
	plan, err := op.plan(ctx)
	var pending *runPendingError
	if errors.As(err, &pending) {
		return pendingRecheck
	}
	checked := metav1.Now()
	condition := extensionsv1alpha1.Condition{Type: ConditionInSync, LastUpdateTime: checked, LastTransitionTime: checked}
	switch {
	case err != nil:
		ctrl.LoggerFrom(ctx).Info("driftCheckFailed", "reason", err.Error())
		condition.Status, condition.Reason, condition.Message = extensionsv1alpha1.ConditionUnknown, reasonCheckFailed, err.Error()
	case plan.HasChanges():
		condition.Status, condition.Reason = extensionsv1alpha1.ConditionFalse, ReasonDrifted
		condition.Message = driftMessage(plan)
	default:
		condition.Status, condition.Reason = extensionsv1alpha1.ConditionTrue, ReasonInSync
		condition.Message = "a plan found no changes to make"
	}
	extension.SetCondition(status, condition)
	recordDrift(infra)
	return a.nextDriftCheck(infra, now).Sub(now)
}

// planKnown is true when a drift plan of the Infrastructure is waiting, under way or done.
func (a *Actuator) planKnown(infra *extensionsv1alpha1.Infrastructure) bool {
	if a.Runs == nil {
		return false
	}
	ticket, known := a.Runs.Lookup(runIDOf(infra))
	return known && ticket.Command == run.Plan
}

// nextDriftCheck is when the Infrastructure is planned next. Its checks fall on the
// instants phase + k×DriftInterval, the phase derived from its UID: stable across
// restarts, and spread over the interval across a seed. The next is the first at least
// half an interval after the last check; when that passed longer ago than a wake-up can
// be late (the controller was down), the first from now: a start never makes every
// Infrastructure due at once.
func (a *Actuator) nextDriftCheck(infra *extensionsv1alpha1.Infrastructure, now time.Time) time.Time {
	interval := a.DriftInterval
	var last time.Time
	if c := extension.FindCondition(&infra.Status.DefaultStatus, ConditionInSync); c != nil {
		last = c.LastUpdateTime.Time
	}
	h := fnv.New64a()
	h.Write([]byte(infra.UID))
	phase := time.Duration(h.Sum64() % uint64(interval))
	slotFrom := func(t time.Time) time.Time {
		sinceSlot := (time.Duration(t.UnixNano()) - phase) % interval
		if sinceSlot < 0 {
			sinceSlot += interval
		}
		if sinceSlot == 0 {
			return t
		}
		return t.Add(interval - sinceSlot)
	}
	next := slotFrom(last.Add(interval / 2))
	if lateness := driftLateness(interval); now.Sub(next) > lateness {
		// A point just passed is due still: the wake-up for it may come a little late.
		next = slotFrom(now.Add(-lateness))
	}
	return next
}

// plan runs terraform plan on the configuration last applied.
func (op *operation) plan(ctx context.Context) (*plan.Summary, error) {
	provider, secret, err := op.inputs(ctx)
	if err != nil {
		return nil, err
	}
	env, err := provider.Credentials(secret)
	if err != nil {
		return nil, err
	}
	req := op.withFleet(run.Request{ID: op.objects().ID, Owner: op.owner(), Command: run.Plan, Env: env, Files: credentialFiles(provider, secret), Background: true}, provider, secret)
	req.LoadEnv = op.sourceEnv(provider)
	result, err := op.runOrWait(ctx, req, run.PriorityDrift, nil)
	if err != nil {
		return nil, throttledError(provider, err)
	}
	if result.Plan == nil {
		return nil, errors.New("the plan run reported no plan")
	}
	return result.Plan, nil
}

// driftLateness is how late a drift check may come and still be made at once.
func driftLateness(interval time.Duration) time.Duration {
	return min(interval/10, time.Minute)
}

func driftMessage(plan *plan.Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the infrastructure differs from its configuration: %s", plan.Summary(addressesListed))
	if len(plan.Drift) > 0 {
		fmt.Fprintf(&b, "; changed outside terraform: %s", plan.DriftSummary(addressesListed))
	}
	b.WriteString("; the next reconcile applies the configuration again")
	return b.String()
}
