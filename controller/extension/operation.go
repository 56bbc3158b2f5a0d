package extension

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// operation is one reconcile of one object.
type operation[T Object] struct {
	r       *Reconciler[T]
	obj     T
	cluster *extensionsv1alpha1.Cluster
	// base is the object as last written, the base of the next status patch.
	base T
	// skipped operations leave the status as it is.
	skipped  bool
	firstRun bool
	// traceID is the reconcile's trace, told in the events of its transitions so that an
	// operator finds it; "" while tracing is off.
	traceID string
}

func (r *Reconciler[T]) newOperation(obj T, cluster *extensionsv1alpha1.Cluster) *operation[T] {
	return &operation[T]{
		r: r, obj: obj, cluster: cluster, base: obj.DeepCopyObject().(T),
		firstRun: obj.GetExtensionStatus().LastOperation == nil,
	}
}

func (op *operation[T]) request(opType extensionsv1alpha1.LastOperationType) Request[T] {
	return Request[T]{Object: op.obj, Cluster: op.cluster, Operation: opType, FirstRun: op.firstRun, op: op}
}

func (op *operation[T]) now() metav1.Time {
	if op.r.Now != nil {
		return metav1.NewTime(op.r.Now())
	}
	return metav1.Now()
}

func (op *operation[T]) status() *extensionsv1alpha1.DefaultStatus {
	return op.obj.GetExtensionStatus()
}

// reconcile creates or reconciles, unless the actuator tells the last success still holds.
func (op *operation[T]) reconcile(ctx context.Context, opType extensionsv1alpha1.LastOperationType) error {
	req := op.request(opType)
	if upToDate, err := op.upToDate(ctx, req); err != nil || upToDate {
		op.skipped = upToDate
		if upToDate {
			ctrl.LoggerFrom(ctx).V(1).Info("upToDate")
		}
		return err
	}
	// Gardener's request is taken before the operation is marked Processing, as Gardener's
	// own extensions take it: Gardener never sees its request and the operation under way
	// at once. Another operation Gardener asks for meanwhile stays for the next reconcile.
	if err := op.takeReconcileRequest(ctx); err != nil {
		return err
	}
	if err := op.begin(ctx, opType, "Reconciling the "+op.r.Kind); err != nil {
		return err
	}
	op.r.takenRequests.Delete(client.ObjectKeyFromObject(op.obj))
	if err := op.r.Actuator.Reconcile(ctx, req); err != nil {
		return err
	}
	op.status().ObservedGeneration = op.obj.GetGeneration()
	return op.succeed(ctx, opType, "The "+op.r.Kind+" is reconciled", reasonReconciled)
}

// takeReconcileRequest removes Gardener's reconcile request, remembering it until the
// operation is marked Processing: a reconcile retried after the status write failed must
// not find the object up to date, as if nobody had asked.
func (op *operation[T]) takeReconcileRequest(ctx context.Context) error {
	if op.obj.GetAnnotations()[AnnotationOperation] != OperationReconcile {
		return nil
	}
	op.r.takenRequests.Store(client.ObjectKeyFromObject(op.obj), struct{}{})
	return op.removeOperationAnnotation(ctx, OperationReconcile)
}

// upToDate is true when nobody asked for an operation, the last one was a success for
// this generation, and the actuator confirms nothing else changed.
func (op *operation[T]) upToDate(ctx context.Context, req Request[T]) (bool, error) {
	checker, ok := op.r.Actuator.(UpToDateChecker[T])
	status := op.status()
	last := status.LastOperation
	_, taken := op.r.takenRequests.Load(client.ObjectKeyFromObject(op.obj))
	if _, asked := op.obj.GetAnnotations()[AnnotationOperation]; !ok || asked || taken ||
		last == nil || last.State != extensionsv1alpha1.LastOperationStateSucceeded ||
		last.Type == extensionsv1alpha1.LastOperationTypeDelete ||
		status.ObservedGeneration != op.obj.GetGeneration() {
		return false, nil
	}
	return checker.UpToDate(ctx, req)
}

// verify lets a Verifier look at an object whose reconcile succeeded; what it found is
// written even when the reconcile was skipped as up to date.
func (op *operation[T]) verify(ctx context.Context, opType extensionsv1alpha1.LastOperationType) ctrl.Result {
	verifier, ok := op.r.Actuator.(Verifier[T])
	if !ok {
		return ctrl.Result{}
	}
	next := verifier.Verify(ctx, op.request(opType))
	op.skipped = false
	return ctrl.Result{RequeueAfter: next}
}

// restore takes over from .status.state; the annotation goes only once that succeeded.
func (op *operation[T]) restore(ctx context.Context) error {
	opType := extensionsv1alpha1.LastOperationTypeRestore
	if err := op.begin(ctx, opType, "Restoring the "+op.r.Kind+" from .status.state"); err != nil {
		return err
	}
	if err := op.r.Actuator.Restore(ctx, op.request(opType)); err != nil {
		return err
	}
	op.status().ObservedGeneration = op.obj.GetGeneration()
	if err := op.succeed(ctx, opType, "The "+op.r.Kind+" is restored", reasonReconciled); err != nil {
		return err
	}
	return op.removeOperationAnnotation(ctx, OperationRestore)
}

// migrate keeps the state in the status and releases the object without removing what it
// describes: another seed takes it over.
func (op *operation[T]) migrate(ctx context.Context) error {
	opType := extensionsv1alpha1.LastOperationTypeMigrate
	if err := op.begin(ctx, opType, "Migrating the "+op.r.Kind); err != nil {
		return err
	}
	if err := op.r.Actuator.Migrate(ctx, op.request(opType)); err != nil {
		return err
	}
	if err := op.succeed(ctx, opType, "The "+op.r.Kind+" is migrated: its state is in .status.state", reasonMigrated); err != nil {
		return err
	}
	if err := op.removeFinalizer(ctx); err != nil {
		return err
	}
	return op.removeOperationAnnotation(ctx, OperationMigrate)
}

// delete removes what the object describes, then releases it.
func (op *operation[T]) delete(ctx context.Context) error {
	if !controllerutil.ContainsFinalizer(op.obj, op.r.Finalizer) {
		op.skipped = true
		return nil
	}
	if MigratedAway(op.obj) {
		// What the object describes belongs to another seed now.
		op.skipped = true
		return op.removeFinalizer(ctx)
	}
	opType := extensionsv1alpha1.LastOperationTypeDelete
	if err := op.begin(ctx, opType, "Deleting the "+op.r.Kind); err != nil {
		return err
	}
	if err := op.r.Actuator.Delete(ctx, op.request(opType)); err != nil {
		return err
	}
	if err := op.succeed(ctx, opType, "The "+op.r.Kind+" is deleted", reasonReconciled); err != nil {
		return err
	}
	return op.removeFinalizer(ctx)
}

// forceDelete releases the object and forgets what it describes without removing it, as
// the shoot's owner confirmed; an event says what was left behind.
func (op *operation[T]) forceDelete(ctx context.Context) error {
	if !controllerutil.ContainsFinalizer(op.obj, op.r.Finalizer) {
		op.skipped = true
		return nil
	}
	opType := extensionsv1alpha1.LastOperationTypeDelete
	if err := op.begin(ctx, opType, "Force-deleting the "+op.r.Kind); err != nil {
		return err
	}
	if err := op.r.Actuator.ForceDelete(ctx, op.request(opType)); err != nil {
		return err
	}
	op.event(corev1.EventTypeWarning, "ForceDeleted", string(opType),
		"The shoot is force-deleted: what this "+op.r.Kind+" created was not removed and is left behind")
	if err := op.succeed(ctx, opType, "The "+op.r.Kind+" is force-deleted: what it created was left behind", reasonForceDeleted); err != nil {
		return err
	}
	return op.removeFinalizer(ctx)
}

// begin marks the operation Processing and writes that at once, so that Gardener sees a
// long operation as under way.
// An operation that goes on (it waits for a run) keeps what it wrote so far: its
// progress, and what it waits for.
func (op *operation[T]) begin(ctx context.Context, opType extensionsv1alpha1.LastOperationType, description string) error {
	if last := op.status().LastOperation; last != nil && last.Type == opType && last.State == extensionsv1alpha1.LastOperationStateProcessing {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("operationStarted", "operation", opType)
	setProcessing(op.status(), opType, description, op.now())
	op.recordTransition(opType)
	return op.patchStatus(ctx)
}

// succeed records the success and writes it at once: the metadata changes that end an
// operation cause another reconcile, which must find the outcome already written.
func (op *operation[T]) succeed(ctx context.Context, opType extensionsv1alpha1.LastOperationType, description, reason string) error {
	setSucceeded(op.status(), opType, description, reason, op.now())
	op.recordTransition(opType)
	return op.patchStatus(ctx)
}

// finish records the outcome of an operation in the status and turns it into a result:
// invalid input and non-retryable failures are terminal, others back off.
func (op *operation[T]) finish(ctx context.Context, opType extensionsv1alpha1.LastOperationType, err error) (ctrl.Result, error) {
	if err == nil {
		return ctrl.Result{}, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The controller is stopping: the actuator was interrupted and kept what it needs,
		// and the next reconcile, here or on the next leader, goes on. Nothing failed.
		ctrl.LoggerFrom(ctx).Info("operationInterrupted", "operation", opType)
		op.skipped = true
		return ctrl.Result{}, nil
	}
	opErr := asError(err)
	if opErr.RetryAfter > 0 {
		ctrl.LoggerFrom(ctx).Info("operationWaiting", "reason", opErr.Reason, "retryAfter", opErr.RetryAfter)
		return ctrl.Result{RequeueAfter: opErr.RetryAfter}, nil
	}
	setFailure(op.status(), opType, opErr, op.now())
	countError(op.r.Kind, opErr.Codes)
	op.recordTransition(opType)
	if opErr.Terminal {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	return ctrl.Result{}, err
}

// recordTransition emits an event when the state of the last operation changes.
func (op *operation[T]) recordTransition(opType extensionsv1alpha1.LastOperationType) {
	previous := op.base.GetExtensionStatus().LastOperation
	current := op.status().LastOperation
	if current == nil || (previous != nil && previous.State == current.State && previous.Type == current.Type) {
		return
	}
	eventType := corev1.EventTypeNormal
	if current.State == extensionsv1alpha1.LastOperationStateError || current.State == extensionsv1alpha1.LastOperationStateFailed {
		eventType = corev1.EventTypeWarning
	}
	message := current.Description
	if op.traceID != "" {
		message += " (trace " + op.traceID + ")"
	}
	op.event(eventType, string(opType)+string(current.State), string(opType), message)
}

func (op *operation[T]) event(eventType, reason, action, message string) {
	if op.r.Recorder != nil {
		op.r.Recorder.Eventf(op.obj, nil, eventType, reason, action, "%s", message)
	}
}
