package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
)

// ConditionControlPlaneHealthy is the condition gardenlet merges into the Shoot's
// condition of the same type.
const ConditionControlPlaneHealthy extensionsv1alpha1.ConditionType = "ControlPlaneHealthy"

// Reasons of the health condition, as Gardener's health check library gives them.
const (
	ReasonHealthCheckSuccessful   = "HealthCheckSuccessful"
	ReasonHealthCheckUnsuccessful = "HealthCheckUnsuccessful"
	reasonHealthCheckProgressing  = "HealthCheckProgressing"
)

// DefaultHealthPeriod is how often the health of every ControlPlane is checked, besides
// whenever one of its workloads changes. Gardener treats an extension's condition as
// outdated when it was not updated for a while, so the check refreshes it each period.
const DefaultHealthPeriod = 30 * time.Second

// HealthReconciler keeps a ControlPlane's ControlPlaneHealthy condition: the kstatus of
// every object the ControlPlane deployed.
type HealthReconciler struct {
	Client client.Client
	// Reader reads the deployed objects live.
	Reader client.Reader
	// Serves tells which ControlPlanes are this controller's, as the protocol's reconciler does.
	Serves func(client.Object) bool
	Period time.Duration
	Now    func() time.Time
}

func (r *HealthReconciler) period() time.Duration {
	if r.Period > 0 {
		return r.Period
	}
	return DefaultHealthPeriod
}

func (r *HealthReconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now())
	}
	return metav1.Now()
}

// Reconcile checks one ControlPlane and checks it again after a period.
func (r *HealthReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cp := &extensionsv1alpha1.ControlPlane{}
	if err := r.Client.Get(ctx, req.NamespacedName, cp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Serves(cp) || !cp.DeletionTimestamp.IsZero() || cp.Status.LastOperation == nil || extension.MigratedAway(cp) {
		return ctrl.Result{}, nil
	}
	previous, err := readState(cp)
	if err != nil {
		return ctrl.Result{}, err
	}
	condition, err := r.check(ctx, cp, previous.inventory)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.write(ctx, cp, condition); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.period()}, nil
}

// check computes the condition from the objects' kstatus: True when every one is current,
// Progressing while the ControlPlane's own operation is under way, False otherwise.
func (r *HealthReconciler) check(ctx context.Context, cp *extensionsv1alpha1.ControlPlane, applied inventory) (extensionsv1alpha1.Condition, error) {
	now := r.now()
	condition := extensionsv1alpha1.Condition{Type: ConditionControlPlaneHealthy, LastUpdateTime: now, LastTransitionTime: now}
	var unhealthy []string
	for _, stub := range applied.objects() {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(stub.GroupVersionKind())
		name := stub.GetKind() + " " + stub.GetName()
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(stub), obj); err != nil {
			if isGone(err) {
				unhealthy = append(unhealthy, name+": missing")
				continue
			}
			return condition, fmt.Errorf("reading %s: %w", name, err)
		}
		result, err := status.Compute(obj)
		if err != nil {
			unhealthy = append(unhealthy, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if result.Status != status.CurrentStatus {
			unhealthy = append(unhealthy, fmt.Sprintf("%s: %s (%s)", name, result.Message, result.Status))
		}
	}
	switch {
	case len(applied) == 0:
		condition.Status, condition.Reason = extensionsv1alpha1.ConditionProgressing, reasonHealthCheckProgressing
		condition.Message = "Nothing is deployed yet."
	case len(unhealthy) == 0:
		condition.Status, condition.Reason = extensionsv1alpha1.ConditionTrue, ReasonHealthCheckSuccessful
		condition.Message = fmt.Sprintf("All %d objects of the control plane are ready.", len(applied))
	case cp.Status.LastOperation.State == extensionsv1alpha1.LastOperationStateProcessing:
		condition.Status, condition.Reason = extensionsv1alpha1.ConditionProgressing, reasonHealthCheckProgressing
		condition.Message = "The control plane is being reconciled: " + strings.Join(unhealthy, "; ")
	default:
		condition.Status, condition.Reason = extensionsv1alpha1.ConditionFalse, ReasonHealthCheckUnsuccessful
		condition.Message = strings.Join(unhealthy, "; ")
	}
	return condition, nil
}

// write patches the condition when it changed, or to refresh its update time once it is
// half a period old; the patch fails rather than overwrite a status written meanwhile.
func (r *HealthReconciler) write(ctx context.Context, cp *extensionsv1alpha1.ControlPlane, condition extensionsv1alpha1.Condition) error {
	if existing := extension.FindCondition(&cp.Status.DefaultStatus, condition.Type); existing != nil &&
		existing.Status == condition.Status && existing.Reason == condition.Reason && existing.Message == condition.Message &&
		condition.LastUpdateTime.Sub(existing.LastUpdateTime.Time) < r.period()/2 {
		return nil
	}
	base := cp.DeepCopy()
	extension.SetCondition(&cp.Status.DefaultStatus, condition)
	if err := r.Client.Status().Patch(ctx, cp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The next event of the ControlPlane brings the newer object.
			return nil
		}
		return fmt.Errorf("patching the %s condition: %w", condition.Type, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("healthChecked", "status", condition.Status, "reason", condition.Reason)
	return nil
}
