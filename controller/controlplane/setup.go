package controlplane

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// WorkloadKinds are the kinds whose changes trigger a health check at once; other kinds
// are checked every period.
func WorkloadKinds() []client.Object {
	return []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}}
}

// SetupWithManager registers the ControlPlane controller and its health check.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, r *Reconciler, a *Actuator, options controller.Options, healthPeriod time.Duration) error {
	if err := r.SetupWithManager(ctx, mgr, options); err != nil {
		return err
	}
	health := &HealthReconciler{Client: mgr.GetClient(), Reader: a.Resources.Client(), Serves: r.Serves, Period: healthPeriod}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("controlplane-health").
		For(&extensionsv1alpha1.ControlPlane{}, builder.WithPredicates(predicate.NewPredicateFuncs(r.Serves))).
		WithOptions(controller.Options{MaxConcurrentReconciles: options.MaxConcurrentReconciles, SkipNameValidation: options.SkipNameValidation})
	ours := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		_, ok := obj.GetLabels()[OwnerLabelGroup+"/name"]
		return ok
	})
	for _, kind := range WorkloadKinds() {
		b = b.WatchesMetadata(kind, handler.EnqueueRequestsFromMapFunc(ownerOf), builder.WithPredicates(ours))
	}
	if err := b.Complete(health); err != nil {
		return fmt.Errorf("setting up the ControlPlane health check: %w", err)
	}
	return nil
}

func ownerOf(_ context.Context, obj client.Object) []reconcile.Request {
	labels := obj.GetLabels()
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: labels[OwnerLabelGroup+"/namespace"], Name: labels[OwnerLabelGroup+"/name"]}}}
}
