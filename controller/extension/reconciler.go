package extension

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run/tracing"
)

// Gardener asks for an operation with an annotation, and removes nothing itself.
const (
	AnnotationOperation   = "gardener.cloud/operation"
	OperationReconcile    = "reconcile"
	OperationMigrate      = "migrate"
	OperationRestore      = "restore"
	OperationWaitForState = "wait-for-state"
)

// Reconciler runs Gardener's extension protocol for one kind and leaves the kind's work to
// its Actuator.
type Reconciler[T Object] struct {
	// Kind names the kind in logs, events and the controller's name, e.g. "Infrastructure".
	Kind string
	// Finalizer keeps an object until its Actuator deleted, force-deleted or migrated it.
	Finalizer string
	Client    client.Client
	// APIReader reads the object live: a cached copy may lag behind the status the
	// previous reconcile wrote.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Actuator  Actuator[T]
	NewObject func() T
	// Types are the provider types served; objects of other types are left alone.
	Types []string
	// Classes are the extension classes served; an object without a class is of class
	// shoot. Shoot alone when empty.
	Classes []extensionsv1alpha1.ExtensionClass
	// Now is the clock of status timestamps; time.Now when nil.
	Now func() time.Time

	// takenRequests are the objects whose reconcile request was removed and whose
	// operation is not yet marked Processing (client.ObjectKey to struct{}).
	takenRequests sync.Map
}

// SetupWithManager registers the controller. Status writes trigger nothing: changes of
// the spec, of annotations and deletion do, and whatever the extra watches add.
func (r *Reconciler[T]) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options, watches ...func(*builder.Builder) *builder.Builder) error {
	// Start the Cluster informer with the manager rather than on the first reconcile,
	// which would otherwise wait for it to sync.
	if _, err := mgr.GetCache().GetInformer(ctx, &extensionsv1alpha1.Cluster{}); err != nil {
		return fmt.Errorf("watching Clusters: %w", err)
	}
	initErrorMetrics(r.Kind)
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.Kind)).
		For(r.NewObject(), builder.WithPredicates(
			predicate.NewPredicateFuncs(r.Serves),
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate{}),
			// Those go through askedFor, alone: two handlers adding one update would have
			// it reconciled twice when a worker takes it between the two.
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !asked(e) }},
		)).
		Watches(r.NewObject(), askedFor{serves: r.Serves}).
		WithOptions(options)
	for _, watch := range watches {
		b = watch(b)
	}
	return b.Complete(r)
}

// PriorityAskedFor is the work-queue priority of a reconcile someone asked for and
// waits for: a change of an object's spec, Gardener's operation annotation, its deletion.
// It goes ahead of the controller's own follow-ups and of the objects a burst created,
// which come at the default priority, 0: during a seed's burst of creations a DNSRecord's
// change, which gardenlet waits for at most two minutes, would wait behind all of them.
const PriorityAskedFor = 10

// askedFor adds the object of an update someone asked for, at PriorityAskedFor where the
// queue has priorities. Other events and updates it leaves to the builder's handler,
// whose predicates leave these to it.
type askedFor struct {
	serves func(client.Object) bool
}

func (askedFor) Create(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (askedFor) Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (askedFor) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (a askedFor) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if !asked(e) || !a.serves(e.ObjectNew) {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)}
	if queue, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		priority := PriorityAskedFor
		queue.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
		return
	}
	q.Add(req)
}

// asked says whether an update is one someone asked for: a new generation of the spec,
// Gardener's operation annotation set or changed, the deletion.
func asked(e event.UpdateEvent) bool {
	if e.ObjectNew == nil || e.ObjectOld == nil {
		return false
	}
	operation := e.ObjectNew.GetAnnotations()[AnnotationOperation]
	return e.ObjectNew.GetGeneration() != e.ObjectOld.GetGeneration() ||
		operation != "" && operation != e.ObjectOld.GetAnnotations()[AnnotationOperation] ||
		deletionPredicate{}.Update(e)
}

// Serves is true for objects of a served type and class.
func (r *Reconciler[T]) Serves(obj client.Object) bool {
	o, ok := obj.(T)
	if !ok {
		return false
	}
	spec := o.GetExtensionSpec()
	class := extensionsv1alpha1.ExtensionClassShoot
	if spec.Class != nil && *spec.Class != "" {
		class = *spec.Class
	}
	classes := r.Classes
	if len(classes) == 0 {
		classes = []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassShoot}
	}
	return slices.Contains(r.Types, spec.Type) && slices.Contains(classes, class)
}

// deletionPredicate admits the update that marks an object for deletion.
type deletionPredicate struct{ predicate.Funcs }

func (deletionPredicate) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}

// Reconcile gets the object and its Cluster, then runs the operation the object asks
// for; the status is patched once more at the end, whatever happened.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	ctx, span := tracing.Start(ctx, "reconcile", attribute.String("terraseed.kind", r.Kind),
		attribute.String("terraseed.namespace", req.Namespace), attribute.String("terraseed.name", req.Name))
	defer func() {
		tracing.Fail(span, retErr)
		span.End()
	}()
	traceID := tracing.TraceID(ctx)
	if traceID != "" {
		ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("traceID", traceID))
	}
	obj := r.NewObject()
	if err := r.APIReader.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.takenRequests.Delete(req.NamespacedName)
		}
		if forgetter, ok := r.Actuator.(Forgetter); ok && apierrors.IsNotFound(err) {
			forgetter.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Serves(obj) {
		return ctrl.Result{}, nil
	}
	cluster, err := clusterOf(ctx, r.Client, obj.GetNamespace())
	if err != nil {
		return ctrl.Result{}, err
	}
	shoot, err := shootOf(cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if shoot.failed() {
		ctrl.LoggerFrom(ctx).Info("skippingFailedShoot")
		return ctrl.Result{}, nil
	}

	op := r.newOperation(obj, cluster)
	op.traceID = traceID
	defer func() {
		if err := op.patchStatus(ctx); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	next := nextOperation(obj)
	tracing.Set(span, attribute.String("terraseed.operation", string(next)))
	switch {
	case next == operationSkip:
		op.skipped = true
		return ctrl.Result{}, nil
	case next == extensionsv1alpha1.LastOperationTypeMigrate:
		return op.finish(ctx, next, op.migrate(ctx))
	case next == extensionsv1alpha1.LastOperationTypeDelete && shoot.forceDeletion():
		return op.finish(ctx, next, op.forceDelete(ctx))
	case next == extensionsv1alpha1.LastOperationTypeDelete:
		return op.finish(ctx, next, op.delete(ctx))
	case next == extensionsv1alpha1.LastOperationTypeRestore:
		return op.finish(ctx, next, op.restore(ctx))
	default:
		result, err := op.finish(ctx, next, op.reconcile(ctx, next))
		if err != nil || !result.IsZero() || ctx.Err() != nil {
			return result, err
		}
		return op.verify(ctx, next), nil
	}
}

// operationSkip is no operation: the object waits for its state, or was migrated away.
const operationSkip extensionsv1alpha1.LastOperationType = ""

// nextOperation chooses in Gardener's order: migrate, delete, restore, create, reconcile.
// After a successful migrate only another migrate, a restore or the deletion come.
func nextOperation(obj Object) extensionsv1alpha1.LastOperationType {
	annotation := obj.GetAnnotations()[AnnotationOperation]
	switch {
	case annotation == OperationMigrate:
		return extensionsv1alpha1.LastOperationTypeMigrate
	case !obj.GetDeletionTimestamp().IsZero():
		return extensionsv1alpha1.LastOperationTypeDelete
	case annotation == OperationWaitForState:
		return operationSkip
	case annotation == OperationRestore:
		return extensionsv1alpha1.LastOperationTypeRestore
	case MigratedAway(obj):
		return operationSkip
	}
	last := obj.GetExtensionStatus().LastOperation
	if last == nil || (last.Type == extensionsv1alpha1.LastOperationTypeCreate && last.State != extensionsv1alpha1.LastOperationStateSucceeded) {
		return extensionsv1alpha1.LastOperationTypeCreate
	}
	return extensionsv1alpha1.LastOperationTypeReconcile
}

// MigratedAway is true once a migrate succeeded: another seed owns what the object describes.
func MigratedAway(obj Object) bool {
	last := obj.GetExtensionStatus().LastOperation
	return last != nil && last.Type == extensionsv1alpha1.LastOperationTypeMigrate && last.State == extensionsv1alpha1.LastOperationStateSucceeded
}
