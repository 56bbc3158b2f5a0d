package infrastructure

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
)

// AnnotationAllowDestroy lets the next apply destroy or replace resources of the
// provider's protected types; it is removed once that apply succeeded.
const AnnotationAllowDestroy = "terraseed.gardener.cloud/allow-destroy"

// Conditions besides Ready.
const (
	// ConditionLastPlan holds the summary of the last apply's plan: True when it was
	// applied, False when the destroy guard refused it.
	ConditionLastPlan extensionsv1alpha1.ConditionType = "LastPlan"
	// ConditionInSync says whether the last periodic plan found the infrastructure as
	// configured; it names the resources that drifted.
	ConditionInSync extensionsv1alpha1.ConditionType = "InfrastructureInSync"
)

// Reasons of the LastPlan and InfrastructureInSync conditions.
const (
	ReasonPlanApplied      = "PlanApplied"
	ReasonDestroyProtected = "DestroyProtected"
	ReasonApplied          = "Applied"
	ReasonInSync           = "NoChanges"
	ReasonDrifted          = "Drifted"
	ReasonCheckFailed      = "CheckFailed"
	// ReasonDeprecatedAllowDestroy is the event of an apply that allow-destroy=true allowed.
	ReasonDeprecatedAllowDestroy = "DeprecatedAllowDestroy"
)

// addressesListed bounds how many addresses a condition message names per kind.
const addressesListed = 25

// applyRequest is the apply of this operation: with the provider's protected types, and
// allowed to destroy them as the annotation says.
func (op *operation) applyRequest(protected []string, env map[string]string) (executor.Request, error) {
	allow, err := op.allowDestroy(time.Now())
	if err != nil {
		return executor.Request{}, err
	}
	return executor.Request{
		ID: op.objects().ID, Owner: op.owner(), Command: run.Apply, Env: env,
		ProtectedTypes: protected, AllowDestroy: allow.any, AllowDestroyPlan: allow.plan,
		Progress: op.actuator.progressReporter(client.ObjectKeyFromObject(op.infra)),
	}, nil
}

// destroyPermission is what the allow-destroy annotation allows.
type destroyPermission struct {
	// any is the deprecated "true": any plan.
	any bool
	// plan is the digest of the one plan allowed.
	plan string
	// expired is when a permission for plan ended, if it did.
	expired *time.Time
	// expiredPlan is the plan of a permission that expired.
	expiredPlan string
}

// allowDestroy reads the allow-destroy annotation: "true" (any plan, deprecated), or the
// digest of the plan allowed, optionally followed by ",expires=<RFC 3339 time>".
func (op *operation) allowDestroy(now time.Time) (destroyPermission, error) {
	value, ok := op.infra.Annotations[AnnotationAllowDestroy]
	if !ok {
		return destroyPermission{}, nil
	}
	if value == "true" {
		return destroyPermission{any: true}, nil
	}
	field := fmt.Sprintf("metadata.annotations[%s]", AnnotationAllowDestroy)
	digest, rest, hasExpiry := strings.Cut(value, ",")
	if !run.PlanDigestValue.MatchString(digest) {
		return destroyPermission{}, extension.InvalidInput(ReasonInvalidConfiguration,
			"%s: %q is neither the digest of a plan (sha256:<16 hex digits>, as the LastPlan condition names it) optionally followed by \",expires=<RFC 3339 time>\", nor true", field, value)
	}
	if !hasExpiry {
		return destroyPermission{plan: digest}, nil
	}
	stamp, ok := strings.CutPrefix(rest, "expires=")
	expires, err := time.Parse(time.RFC3339, stamp)
	if !ok || err != nil {
		return destroyPermission{}, extension.InvalidInput(ReasonInvalidConfiguration,
			"%s: %q after the digest is not expires=<RFC 3339 time>, such as expires=2030-01-02T15:04:05Z", field, rest)
	}
	if !now.Before(expires) {
		return destroyPermission{expired: &expires, expiredPlan: digest}, nil
	}
	return destroyPermission{plan: digest}, nil
}

// allowedOnce tells in an event that the deprecated allow-destroy=true allowed an apply.
func (op *operation) allowedOnce(req executor.Request) {
	if req.AllowDestroy && op.actuator.Recorder != nil {
		op.actuator.Recorder.Eventf(op.infra, nil, corev1.EventTypeWarning, ReasonDeprecatedAllowDestroy, "Reconcile",
			"%s=true allows any plan and is deprecated: set it to the digest of the plan to allow, which the LastPlan condition names", AnnotationAllowDestroy)
	}
}

// afterApply records the plan that was applied and uses up a permission to destroy.
func (op *operation) afterApply(ctx context.Context, plan *run.PlanSummary) error {
	now := metav1.Now()
	if plan != nil {
		extension.SetCondition(&op.infra.Status.DefaultStatus, extensionsv1alpha1.Condition{
			Type: ConditionLastPlan, Status: extensionsv1alpha1.ConditionTrue, Reason: ReasonPlanApplied,
			Message: appliedMessage(plan), LastUpdateTime: now, LastTransitionTime: now,
		})
	}
	if op.actuator.DriftInterval > 0 {
		extension.SetCondition(&op.infra.Status.DefaultStatus, extensionsv1alpha1.Condition{
			Type: ConditionInSync, Status: extensionsv1alpha1.ConditionTrue, Reason: ReasonApplied,
			Message: "the last apply made the infrastructure match its configuration", LastUpdateTime: now, LastTransitionTime: now,
		})
	}
	if _, ok := op.infra.Annotations[AnnotationAllowDestroy]; ok {
		if err := op.req.RemoveAnnotation(ctx, AnnotationAllowDestroy); err != nil {
			return err
		}
	}
	return nil
}

func appliedMessage(plan *run.PlanSummary) string {
	if plan.Digest == "" {
		return "applied: " + plan.Summary(addressesListed)
	}
	return fmt.Sprintf("applied plan %s: %s", plan.Digest, plan.Summary(addressesListed))
}

// refused records an apply the destroy guard stopped, with the digest of its plan, says
// why a permission did not allow it, and how to allow exactly this plan.
func (op *operation) refused(err error) error {
	var runErr *run.Error
	if !errors.Is(err, run.ErrDestroyProtected) || !errors.As(err, &runErr) {
		return err
	}
	now := metav1.Now()
	message := runErr.Message
	if allow, _ := op.allowDestroy(now.Time); allow.expired != nil {
		message = fmt.Sprintf("%s; the permission for plan %s expired at %s", message, allow.expiredPlan, allow.expired.Format(time.RFC3339))
	}
	if runErr.PlanDigest != "" {
		message = fmt.Sprintf("%s; plan %s: to allow exactly this plan once, annotate the Infrastructure with %s=%s (optionally followed by ,expires=<RFC 3339 time>)",
			message, runErr.PlanDigest, AnnotationAllowDestroy, runErr.PlanDigest)
	}
	extension.SetCondition(&op.infra.Status.DefaultStatus, extensionsv1alpha1.Condition{
		Type: ConditionLastPlan, Status: extensionsv1alpha1.ConditionFalse, Reason: ReasonDestroyProtected,
		Message: message, LastUpdateTime: now, LastTransitionTime: now,
	})
	if op.actuator.Recorder != nil {
		op.actuator.Recorder.Eventf(op.infra, nil, corev1.EventTypeWarning, ReasonDestroyProtected, "Reconcile", "%s", message)
	}
	return &extension.Error{
		Reason: ReasonDestroyProtected, Terminal: true,
		Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
		Err:   fmt.Errorf("terraform apply: %s", message),
	}
}

// Verify plans, without applying, about every DriftInterval, and records in the
// InfrastructureInSync condition whether the infrastructure still matches its
// configuration. Each Infrastructure's plans fall at its own point of the interval (see
// nextDriftCheck), so that a seed's plans spread over it, also after a restart.
func (a *Actuator) Verify(ctx context.Context, req request) time.Duration {
	infra := req.Object
	// What an earlier process recorded, before this one's first apply or plan; with or
	// without drift checks.
	if infra.Status.State != nil {
		recordStateSize(infra, len(infra.Status.State.Raw))
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
		condition.Status, condition.Reason, condition.Message = extensionsv1alpha1.ConditionUnknown, ReasonCheckFailed, err.Error()
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
func (op *operation) plan(ctx context.Context) (*run.PlanSummary, error) {
	provider, secret, err := op.inputs(ctx)
	if err != nil {
		return nil, err
	}
	env, err := provider.Credentials(secret)
	if err != nil {
		return nil, err
	}
	req := op.withFleet(executor.Request{ID: op.objects().ID, Owner: op.owner(), Command: run.Plan, Env: env, Background: true}, provider)
	result, err := op.runOrWait(ctx, req, executor.PriorityDrift, nil)
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

func driftMessage(plan *run.PlanSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the infrastructure differs from its configuration: %s", plan.Summary(addressesListed))
	if len(plan.Drift) > 0 {
		fmt.Fprintf(&b, "; changed outside terraform: %s", plan.DriftSummary(addressesListed))
	}
	b.WriteString("; the next reconcile applies the configuration again")
	return b.String()
}
