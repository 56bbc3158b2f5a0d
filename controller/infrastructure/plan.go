package infrastructure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/terraformer"
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
)

// addressesListed bounds how many addresses a condition message names per kind.
const addressesListed = 25

// progressReporter writes a run's progress into lastOperation; the status is patched
// from the executor's goroutine while the operation waits for the run.
func (op *operation) progressReporter(ctx context.Context) func(terraformer.Progress) {
	var mu sync.Mutex
	return func(p terraformer.Progress) {
		mu.Lock()
		defer mu.Unlock()
		last := op.infra.Status.LastOperation
		if last == nil {
			return
		}
		last.Progress = p.Percent()
		last.Description = p.Description()
		last.LastUpdateTime = metav1.Now()
		if err := op.req.PatchStatus(ctx); err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("progressNotPatched", "reason", err.Error())
		}
	}
}

// applyRequest is the apply of this operation: with the provider's protected types, and
// allowed to destroy them when the annotation says so.
func (op *operation) applyRequest(ctx context.Context, protected []string, env map[string]string) executor.Request {
	_, allow := op.infra.Annotations[AnnotationAllowDestroy]
	return executor.Request{
		ID: op.objects().ID, Owner: op.owner(), Command: terraformer.Apply, Env: env,
		ProtectedTypes: protected, AllowDestroy: allow, Progress: op.progressReporter(ctx),
	}
}

// afterApply records the plan that was applied and uses up a permission to destroy.
func (op *operation) afterApply(ctx context.Context, plan *terraformer.PlanSummary) error {
	now := metav1.Now()
	if plan != nil {
		extension.SetCondition(&op.infra.Status.DefaultStatus, extensionsv1alpha1.Condition{
			Type: ConditionLastPlan, Status: extensionsv1alpha1.ConditionTrue, Reason: ReasonPlanApplied,
			Message: "applied: " + plan.Summary(addressesListed), LastUpdateTime: now, LastTransitionTime: now,
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

// refused records an apply the destroy guard stopped, with an event naming what it would
// have destroyed, and says how to allow it.
func (op *operation) refused(err error) error {
	var runErr *terraformer.RunError
	if !errors.Is(err, terraformer.ErrDestroyProtected) || !errors.As(err, &runErr) {
		return err
	}
	now := metav1.Now()
	message := fmt.Sprintf("%s; to allow it once, annotate the Infrastructure with %s=true", runErr.Message, AnnotationAllowDestroy)
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
		Err:   fmt.Errorf("%w; to allow it once, annotate the Infrastructure with %s=true", err, AnnotationAllowDestroy),
	}
}

// Verify plans, without applying, every DriftInterval, and records in the
// InfrastructureInSync condition whether the infrastructure still matches its
// configuration.
func (a *Actuator) Verify(ctx context.Context, req request) time.Duration {
	if a.DriftInterval <= 0 {
		return 0
	}
	status := &req.Object.Status.DefaultStatus
	if last := extension.FindCondition(status, ConditionInSync); last != nil {
		if age := time.Since(last.LastUpdateTime.Time); age < a.DriftInterval {
			return a.DriftInterval - age
		}
	}
	op := a.operation(req)
	now := metav1.Now()
	condition := extensionsv1alpha1.Condition{Type: ConditionInSync, LastUpdateTime: now, LastTransitionTime: now}
	plan, err := op.plan(ctx)
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
	return a.DriftInterval
}

// plan runs terraform plan on the configuration last applied.
func (op *operation) plan(ctx context.Context) (*terraformer.PlanSummary, error) {
	provider, secret, err := op.inputs(ctx)
	if err != nil {
		return nil, err
	}
	env, err := provider.Credentials(secret)
	if err != nil {
		return nil, err
	}
	result, err := op.actuator.run(ctx, executor.Request{ID: op.objects().ID, Owner: op.owner(), Command: terraformer.Plan, Env: env})
	if err != nil {
		return nil, err
	}
	if result.Plan == nil {
		return nil, errors.New("the plan run reported no plan")
	}
	return result.Plan, nil
}

func driftMessage(plan *terraformer.PlanSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the infrastructure differs from its configuration: %s", plan.Summary(addressesListed))
	if len(plan.Drift) > 0 {
		fmt.Fprintf(&b, "; changed outside terraform: %s", plan.DriftSummary(addressesListed))
	}
	b.WriteString("; the next reconcile applies the configuration again")
	return b.String()
}
