package extension

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// Object is an extension resource of any kind: an Infrastructure, a ControlPlane, ...
type Object interface {
	client.Object
	GetExtensionSpec() *extensionsv1alpha1.DefaultSpec
	GetExtensionStatus() *extensionsv1alpha1.DefaultStatus
}

// Actuator does the work of one kind; the Reconciler does Gardener's protocol around it.
// Each method changes the object's status as far as the kind's fields go (providerStatus,
// state, ...); the Reconciler records the outcome and writes the status.
type Actuator[T Object] interface {
	// Reconcile makes what the object describes exist (Create and Reconcile).
	Reconcile(ctx context.Context, req Request[T]) error
	// Delete removes what Reconcile made.
	Delete(ctx context.Context, req Request[T]) error
	// ForceDelete forgets what Reconcile made without removing it: Gardener's force deletion
	// of a shoot whose resources cannot be removed.
	ForceDelete(ctx context.Context, req Request[T]) error
	// Migrate keeps what another seed needs to take over in .status.state and releases what
	// this seed holds, removing nothing.
	Migrate(ctx context.Context, req Request[T]) error
	// Restore takes over from .status.state, then reconciles.
	Restore(ctx context.Context, req Request[T]) error
}

// UpToDateChecker is implemented by actuators that can tell, without acting, that the last
// successful reconcile still holds, as when a controller restarts or an input it watches
// changed in a way that does not matter. Only then is a Reconcile skipped.
type UpToDateChecker[T Object] interface {
	UpToDate(ctx context.Context, req Request[T]) (bool, error)
}

// Verifier is implemented by actuators that look, between operations, whether what an
// up-to-date object describes still matches the world, changing nothing but what the
// object's conditions say about it. Verify runs after every successful reconcile, also
// one skipped as up to date, and returns when to look next; zero looks no more.
type Verifier[T Object] interface {
	Verify(ctx context.Context, req Request[T]) (next time.Duration)
}

// Forgetter is implemented by actuators that keep something for an object between
// reconciles, such as a run's outcome, and drop it once the object is gone.
type Forgetter interface {
	Forget(key client.ObjectKey)
}

// Request is one operation on one object.
type Request[T Object] struct {
	Object T
	// Cluster is the Cluster of the object's namespace, nil when there is none.
	Cluster *extensionsv1alpha1.Cluster
	// Operation is the operation under way, as the status records it.
	Operation extensionsv1alpha1.LastOperationType
	// FirstRun is true until an operation was recorded: what the actuator keeps for the
	// object most likely does not exist yet.
	FirstRun bool

	op *operation[T]
}

// PatchStatus writes the status as changed so far, for what must be safe before the
// actuator goes on (the state before the objects holding it are deleted).
func (r Request[T]) PatchStatus(ctx context.Context) error { return r.op.patchStatus(ctx) }

// EnsureFinalizer adds the kind's finalizer; an actuator calls it once the input is
// known valid and before it creates anything.
func (r Request[T]) EnsureFinalizer(ctx context.Context) error { return r.op.addFinalizer(ctx) }

// RemoveAnnotation removes an annotation the actuator acted on, such as a permission
// given once.
func (r Request[T]) RemoveAnnotation(ctx context.Context, key string) error {
	return r.op.patchMetadata(ctx, func(obj T) bool {
		annotations := obj.GetAnnotations()
		if _, ok := annotations[key]; !ok {
			return false
		}
		delete(annotations, key)
		obj.SetAnnotations(annotations)
		return true
	})
}
