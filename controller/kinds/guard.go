package kinds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
)

// AnnotationAllowDestroy lets the next apply destroy or replace resources of the
// provider's protected types; it is removed once that apply succeeded.
const AnnotationAllowDestroy = run.LabelPrefix + "allow-destroy"

// ConditionLastPlan holds the summary of the last apply's plan: True when it was applied,
// False when the destroy guard refused it.
const ConditionLastPlan extensionsv1alpha1.ConditionType = "LastPlan"

// Reasons of the LastPlan condition.
const (
	reasonPlanApplied      = "PlanApplied"
	ReasonDestroyProtected = "DestroyProtected"
	// ReasonDeprecatedAllowDestroy is the event of an apply that allow-destroy=true allowed.
	ReasonDeprecatedAllowDestroy = "DeprecatedAllowDestroy"
)

// addressesListed bounds how many addresses a condition message names per kind.
const addressesListed = 25

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
	value, ok := op.obj.GetAnnotations()[AnnotationAllowDestroy]
	if !ok {
		return destroyPermission{}, nil
	}
	if value == "true" {
		return destroyPermission{any: true}, nil
	}
	field := fmt.Sprintf("metadata.annotations[%s]", AnnotationAllowDestroy)
	digest, rest, hasExpiry := strings.Cut(value, ",")
	if !plan.DigestValue.MatchString(digest) {
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

// warnAllowDestroy tells in an event that the deprecated allow-destroy=true allowed an apply.
func (op *operation) warnAllowDestroy(_ context.Context, s *applyScope) error {
	if s.request.AllowDestroy && op.actuator.Recorder != nil {
		op.actuator.Recorder.Eventf(op.obj, nil, corev1.EventTypeWarning, ReasonDeprecatedAllowDestroy, "Reconcile",
			"%s=true allows any plan and is deprecated: set it to the digest of the plan to allow, which the LastPlan condition names", AnnotationAllowDestroy)
	}
	return nil
}

func appliedMessage(plan *plan.Summary) string {
	if plan.Digest == "" {
		return "applied: " + plan.Summary(addressesListed)
	}
	return fmt.Sprintf("applied plan %s: %s", plan.Digest, plan.Summary(addressesListed))
}

// destroyAdvice says how to allow exactly the plan digest names once. The protected
// resources of a BackupBucket or BackupEntry hold a shoot's backups, which no plan is to
// destroy: allowing it would delete what a restore or a source entry still reads, so the
// refusal names what to look at instead.
func (op *operation) destroyAdvice(digest string) string {
	if op.kind == backupBucketKind || op.kind == backupEntryKind {
		return fmt.Sprintf("the %s's protected resources hold backups, which a plan must not destroy: find out why its configuration no longer matches them "+
			"(a spec changed by hand, its state or what records where they are lost), and set it back", op.kind.name)
	}
	return fmt.Sprintf("to allow exactly this plan once, annotate the %s with %s=%s (optionally followed by ,expires=<RFC 3339 time>)",
		op.kind.name, AnnotationAllowDestroy, digest)
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
		message = fmt.Sprintf("%s; plan %s: %s", message, runErr.PlanDigest, op.destroyAdvice(runErr.PlanDigest))
	}
	extension.SetCondition(op.status(), extensionsv1alpha1.Condition{
		Type: ConditionLastPlan, Status: extensionsv1alpha1.ConditionFalse, Reason: ReasonDestroyProtected,
		Message: message, LastUpdateTime: now, LastTransitionTime: now,
	})
	if op.actuator.Recorder != nil {
		op.actuator.Recorder.Eventf(op.obj, nil, corev1.EventTypeWarning, ReasonDestroyProtected, "Reconcile", "%s", message)
	}
	return &extension.Error{
		Reason: ReasonDestroyProtected, Terminal: true,
		Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
		Err:   fmt.Errorf("terraform apply: %s", message),
	}
}
