package infrastructure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform"
)

const (
	// Finalizer keeps an Infrastructure until its terraform resources are destroyed.
	Finalizer = "extensions.gardener.cloud/infrastructure"

	// AnnotationOperation is how Gardener asks for an operation.
	AnnotationOperation     = "gardener.cloud/operation"
	OperationReconcile      = "reconcile"
	OperationMigrate        = "migrate"
	OperationRestore        = "restore"
	OperationWaitForState   = "wait-for-state"
	secretRefIndex          = "spec.secretRef"
	retryAfterRunInProgress = 10 * time.Second
)

// UncachedObjects are the kinds the manager's client must read live: a seed holds many
// of them, and caching every one would cost memory in proportion to the seed, not to
// the Infrastructures served.
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Pod{}, &corev1.ServiceAccount{}, &rbacv1.RoleBinding{}}
}

// Reconciler makes the infrastructure an Infrastructure describes exist, and says so in its status.
type Reconciler struct {
	Client client.Client
	// APIReader reads Secrets uncached, so that the manager never caches every Secret of a seed.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Providers *templates.Registry
	Executor  terraform.Executor
	// Types are the provider types this instance serves; others are left alone.
	Types []string
	// Now is the clock of status timestamps; time.Now when nil.
	Now func() time.Time
}

// SetupWithManager registers the reconciler. Status writes trigger nothing: only changes
// of the spec, of annotations, deletion and changes of a referenced secret do.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &extensionsv1alpha1.Infrastructure{}, secretRefIndex, indexSecretRef); err != nil {
		return fmt.Errorf("indexing Infrastructures by secret: %w", err)
	}
	// Start the Cluster informer with the manager rather than on the first reconcile,
	// which would otherwise wait for it to sync.
	if _, err := mgr.GetCache().GetInformer(ctx, &extensionsv1alpha1.Cluster{}); err != nil {
		return fmt.Errorf("watching Clusters: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("infrastructure").
		For(&extensionsv1alpha1.Infrastructure{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(r.serves),
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate{}),
		)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.infrastructuresUsingSecret)).
		WithOptions(options).
		Complete(r)
}

func (r *Reconciler) serves(obj client.Object) bool {
	infra, ok := obj.(*extensionsv1alpha1.Infrastructure)
	return ok && slices.Contains(r.Types, infra.Spec.Type)
}

func indexSecretRef(obj client.Object) []string {
	infra := obj.(*extensionsv1alpha1.Infrastructure)
	namespace := infra.Spec.SecretRef.Namespace
	if namespace == "" {
		namespace = infra.Namespace
	}
	return []string{namespace + "/" + infra.Spec.SecretRef.Name}
}

func (r *Reconciler) infrastructuresUsingSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	list := &extensionsv1alpha1.InfrastructureList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{secretRefIndex: secret.GetNamespace() + "/" + secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listingInfrastructuresForSecret", "secret", client.ObjectKeyFromObject(secret))
		return nil
	}
	var requests []reconcile.Request
	for _, infra := range list.Items {
		if r.serves(&infra) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&infra)})
		}
	}
	return requests
}

// deletionPredicate admits the update that marks an object for deletion.
type deletionPredicate struct{ predicate.Funcs }

func (deletionPredicate) Update(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
}

// Reconcile gets the Infrastructure, then runs the operation it asks for; the status is
// patched once at the end, whatever happened.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	// Read live: a cached copy may lag behind the status written by the previous reconcile.
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, infra); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.serves(infra) {
		return ctrl.Result{}, nil
	}

	op := &operation{reconciler: r, infra: infra, statusBase: infra.DeepCopy(), firstRun: infra.Status.LastOperation == nil}
	defer func() {
		if err := op.patchStatus(ctx); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	switch {
	case infra.Annotations[AnnotationOperation] == OperationMigrate:
		return op.finish(ctx, extensionsv1alpha1.LastOperationTypeMigrate, op.migrate(ctx))
	case !infra.DeletionTimestamp.IsZero():
		return op.finish(ctx, extensionsv1alpha1.LastOperationTypeDelete, op.delete(ctx))
	case infra.Annotations[AnnotationOperation] == OperationWaitForState:
		return ctrl.Result{}, nil
	case infra.Annotations[AnnotationOperation] == OperationRestore:
		return op.finish(ctx, extensionsv1alpha1.LastOperationTypeRestore, op.restore(ctx))
	default:
		return op.finish(ctx, normalOperationType(infra), op.reconcile(ctx))
	}
}

// normalOperationType is Create until a first reconcile succeeded, as Gardener computes it.
func normalOperationType(infra *extensionsv1alpha1.Infrastructure) extensionsv1alpha1.LastOperationType {
	last := infra.Status.LastOperation
	if last == nil || (last.Type == extensionsv1alpha1.LastOperationTypeCreate && last.State != extensionsv1alpha1.LastOperationStateSucceeded) {
		return extensionsv1alpha1.LastOperationTypeCreate
	}
	return extensionsv1alpha1.LastOperationTypeReconcile
}

// operation is one reconcile of one Infrastructure.
type operation struct {
	reconciler *Reconciler
	infra      *extensionsv1alpha1.Infrastructure
	// statusBase is the status as last written, the base of the next status patch.
	statusBase *extensionsv1alpha1.Infrastructure
	// skipped operations leave the status as it is.
	skipped bool
	// firstRun is true until an operation was recorded: the run objects most likely do
	// not exist yet.
	firstRun bool
}

func (op *operation) now() metav1.Time {
	if op.reconciler.Now != nil {
		return metav1.NewTime(op.reconciler.Now())
	}
	return metav1.Now()
}

// finish records the outcome of an operation in the status and turns it into a result:
// invalid input and non-retryable failures are terminal, others back off.
func (op *operation) finish(ctx context.Context, opType extensionsv1alpha1.LastOperationType, err error) (ctrl.Result, error) {
	if err == nil {
		return ctrl.Result{}, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The controller is stopping: the run was interrupted and saved its state, and the
		// next reconcile, here or on the next leader, goes on with it. Nothing failed.
		ctrl.LoggerFrom(ctx).Info("operationInterrupted", "operation", opType)
		op.skipped = true
		return ctrl.Result{}, nil
	}
	opErr := classify(err)
	if opErr.reason == ReasonRunInProgress {
		// Not a failure: the run under way will write the outcome.
		ctrl.LoggerFrom(ctx).Info("runInProgress", "retryAfter", retryAfterRunInProgress)
		return ctrl.Result{RequeueAfter: retryAfterRunInProgress}, nil
	}
	setFailure(op.infra, opType, opErr, op.now())
	op.recordTransition(opType)
	switch {
	case opErr.terminal:
		return ctrl.Result{}, reconcile.TerminalError(err)
	default:
		return ctrl.Result{}, err
	}
}

// begin marks the operation as Processing and writes that at once, so that Gardener sees
// a long terraform run as under way.
func (op *operation) begin(ctx context.Context, opType extensionsv1alpha1.LastOperationType, description string) error {
	ctrl.LoggerFrom(ctx).Info("operationStarted", "operation", opType)
	setProcessing(op.infra, opType, description, op.now())
	op.recordTransition(opType)
	return op.patchStatus(ctx)
}

// succeed records the success and writes it at once: the metadata changes that end an
// operation cause another reconcile, which must find the outcome already written.
func (op *operation) succeed(ctx context.Context, opType extensionsv1alpha1.LastOperationType, description, reason string) error {
	setSucceeded(op.infra, opType, description, reason, op.now())
	op.recordTransition(opType)
	return op.patchStatus(ctx)
}

// recordTransition emits an event when the state of the last operation changes.
func (op *operation) recordTransition(opType extensionsv1alpha1.LastOperationType) {
	previous := op.statusBase.Status.LastOperation
	current := op.infra.Status.LastOperation
	if op.reconciler.Recorder == nil || current == nil {
		return
	}
	if previous != nil && previous.State == current.State && previous.Type == current.Type {
		return
	}
	eventType := corev1.EventTypeNormal
	if current.State == extensionsv1alpha1.LastOperationStateError || current.State == extensionsv1alpha1.LastOperationStateFailed {
		eventType = corev1.EventTypeWarning
	}
	op.reconciler.Recorder.Eventf(op.infra, nil, eventType, string(opType)+string(current.State), string(opType), "%s", current.Description)
}

func (op *operation) patchStatus(ctx context.Context) error {
	if op.skipped {
		return nil
	}
	// Metadata patched since the base was taken must not enter the patch: a changed
	// resourceVersion would turn it into an optimistic lock.
	base := op.statusBase.DeepCopy()
	base.ObjectMeta = *op.infra.ObjectMeta.DeepCopy()
	patch := client.MergeFrom(base)
	if data, err := patch.Data(op.infra); err == nil && string(data) == "{}" {
		// Written already, as after succeed: a request would change nothing.
		return nil
	}
	if err := op.reconciler.Client.Status().Patch(ctx, op.infra, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching the status: %w", err)
	}
	op.statusBase = op.infra.DeepCopy()
	return nil
}

// patchMetadata changes finalizers or annotations with a patch of its own, leaving the
// status being built untouched.
func (op *operation) patchMetadata(ctx context.Context, change func(*extensionsv1alpha1.Infrastructure)) error {
	changed := op.infra.DeepCopy()
	base := changed.DeepCopy()
	change(changed)
	if err := op.reconciler.Client.Patch(ctx, changed, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) && !changed.DeletionTimestamp.IsZero() {
			return nil
		}
		return fmt.Errorf("patching the metadata: %w", err)
	}
	op.infra.ObjectMeta = changed.ObjectMeta
	return nil
}

func (op *operation) addFinalizer(ctx context.Context) error {
	if controllerutil.ContainsFinalizer(op.infra, Finalizer) {
		return nil
	}
	return op.patchMetadata(ctx, func(infra *extensionsv1alpha1.Infrastructure) { controllerutil.AddFinalizer(infra, Finalizer) })
}

func (op *operation) removeFinalizerAndOperation(ctx context.Context) error {
	if !controllerutil.ContainsFinalizer(op.infra, Finalizer) && op.infra.Annotations[AnnotationOperation] == "" {
		return nil
	}
	return op.patchMetadata(ctx, func(infra *extensionsv1alpha1.Infrastructure) {
		controllerutil.RemoveFinalizer(infra, Finalizer)
		delete(infra.Annotations, AnnotationOperation)
	})
}

func (op *operation) removeOperation(ctx context.Context) error {
	if _, ok := op.infra.Annotations[AnnotationOperation]; !ok {
		return nil
	}
	return op.patchMetadata(ctx, func(infra *extensionsv1alpha1.Infrastructure) { delete(infra.Annotations, AnnotationOperation) })
}
