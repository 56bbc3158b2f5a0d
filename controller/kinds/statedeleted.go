package kinds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/run"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// ConditionStateObjectDeleted names the state object someone else deleted, and says what
// became of its state: kept in the history and written anew, or why the deletion waits.
const ConditionStateObjectDeleted extensionsv1alpha1.ConditionType = "StateObjectDeleted"

// Reasons of the StateObjectDeleted condition and its events.
const (
	// reasonStateWrittenAnew: the deleted state object is gone and written anew with its
	// state, which the history holds as well.
	reasonStateWrittenAnew = "StateObjectWrittenAnew"
	// reasonStateDeletionHeld: the deletion waits behind the run finalizer, since letting
	// it finish would lose the state.
	reasonStateDeletionHeld = "StateObjectDeletionHeld"
)

// keepDeletedState answers a deletion of the state object by someone else (kubectl
// delete): the run finalizer would keep it terminating forever, and a run would write
// into an object about to go. Once no run may write the state, the state is kept in the
// history (checked by reading it back), the finalizer removed, so that the deletion
// finishes, and the state written anew into a new object; an event and the
// StateObjectDeleted condition name the object. Nothing is let go that no other object
// holds: a state the history cannot hold (unreadable, too large) keeps the finalizer,
// and so does an object that carries other finalizers, until those are gone; both are
// reported. A process that ends between the release and the write leaves the state
// missing, which the next apply recovers from the history.
func (op *operation) keepDeletedState(ctx context.Context) error {
	objects := op.objects()
	deleted, err := op.terminatingState(ctx)
	if err != nil || deleted == nil {
		return err
	}
	if ticket, known := op.actuator.Runs.Lookup(objects.ID); known {
		return &runPendingError{ticket: ticket, other: true}
	}
	if err := op.waitForEarlierRun(ctx, false); err != nil {
		return err
	}
	name := fmt.Sprintf("%s %s/%s", objects.Storage.Kind(), objects.ID.Namespace, objects.StateName())
	if others := slices.DeleteFunc(slices.Clone(deleted.Finalizers), func(f string) bool { return f == tfstate.Finalizer }); len(others) > 0 {
		return op.stateDeletionHeld(ctx, name, fmt.Sprintf("it carries the finalizers %s of others, which must go first", strings.Join(others, ", ")))
	}
	stored, err := objects.Store(op.actuator.Client).Inspect(ctx)
	if err != nil {
		return op.stateNotReadNow(err)
	}
	if stored.Unreadable != nil {
		return op.stateDeletionHeld(ctx, name, "its state cannot be read, and no other object would hold it")
	}
	kept := "it held no state"
	if stored.State != nil {
		if kept, err = op.historyHolds(ctx, stored); err != nil {
			return op.stateDeletionHeld(ctx, name, err.Error())
		}
	}
	// Released as read: a state written meanwhile conflicts, and is looked at again.
	base := deleted.DeepCopy()
	controllerutil.RemoveFinalizer(deleted, tfstate.Finalizer)
	if err := op.actuator.Client.Patch(ctx, deleted, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing the deleted %s: %w", name, err)
	}
	if stored.State != nil {
		if _, err := objects.Store(op.actuator.Client).Restore(ctx, stored.State); err != nil {
			return fmt.Errorf("writing the state of the deleted %s anew: %w", name, err)
		}
	}
	ctrl.LoggerFrom(ctx).Info("stateObjectWrittenAnew", "serial", stored.Serial)
	return op.stateDeletionReported(ctx, corev1.EventTypeWarning, reasonStateWrittenAnew,
		fmt.Sprintf("%s was deleted by someone else: the deletion finished, %s, and the object is written anew", name, kept))
}

// terminatingState is the metadata of the state object when someone deleted it; nil when
// it exists undeleted or not at all.
func (op *operation) terminatingState(ctx context.Context) (*metav1.PartialObjectMetadata, error) {
	objects := op.objects()
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(objects.Storage.Kind()))
	// The watch's cache, where there is one: a state object being deleted shows there
	// first, and is read again from the API server before anything is done about it.
	var reader client.Reader = op.actuator.Client
	if op.actuator.Metadata != nil {
		reader = op.actuator.Metadata
	}
	err := reader.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, meta)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", objects.Storage.Kind(), objects.StateName(), err)
	}
	if meta.DeletionTimestamp == nil {
		return nil, nil
	}
	return meta, nil
}

// historyHolds keeps the stored state in the history, even where the history is turned
// off (one state then), and reads it back: the deletion may finish only once another
// object holds the state. It says where the state is kept.
func (op *operation) historyHolds(ctx context.Context, stored *tfstate.Stored) (string, error) {
	objects := op.objects()
	depth := max(op.actuator.State.History(), 1)
	if _, err := objects.AppendHistory(ctx, op.actuator.Client, stored.State, depth, metav1.Now()); err != nil {
		return "", fmt.Errorf("its state (serial %d) could not be kept in the history: %w", stored.Serial, err)
	}
	history, err := objects.ReadHistory(ctx, op.actuator.Client)
	if err != nil {
		return "", fmt.Errorf("its state (serial %d) is not read back from the history: %w", stored.Serial, err)
	}
	for _, entry := range history.Lineage(stored.Lineage) {
		if entry.Serial != stored.Serial {
			continue
		}
		if _, err := history.State(entry); err != nil {
			return "", fmt.Errorf("its state (serial %d) is not read back from the history: %w", stored.Serial, err)
		}
		return fmt.Sprintf("its state (serial %d) is kept in the history %s", stored.Serial, objects.HistoryName()), nil
	}
	return "", fmt.Errorf("the history %s cannot hold its state (serial %d): it takes more than one object", objects.HistoryName(), stored.Serial)
}

// stateDeletionHeld reports a deletion of the state object that waits behind the run
// finalizer, and why: nothing else holds the state, or others' finalizers go first.
func (op *operation) stateDeletionHeld(ctx context.Context, name, why string) error {
	message := fmt.Sprintf("%s was deleted by someone else; the deletion waits, since %s", name, why)
	if c := extension.FindCondition(op.status(), ConditionStateObjectDeleted); c != nil && c.Reason == reasonStateDeletionHeld && c.Message == message {
		return nil
	}
	return op.stateDeletionReported(ctx, corev1.EventTypeWarning, reasonStateDeletionHeld, message)
}

// stateDeletionReported says what became of a deleted state object in an event and in
// the StateObjectDeleted condition.
func (op *operation) stateDeletionReported(ctx context.Context, eventType, reason, message string) error {
	if op.actuator.Recorder != nil {
		op.actuator.Recorder.Eventf(op.obj, nil, eventType, reason, "KeepState", "%s", message)
	}
	now := metav1.Now()
	extension.SetCondition(op.status(), extensionsv1alpha1.Condition{
		Type: ConditionStateObjectDeleted, Status: extensionsv1alpha1.ConditionTrue, Reason: reason,
		Message: message, LastUpdateTime: now, LastTransitionTime: now,
	})
	return op.req.PatchStatus(ctx)
}

// keepDeletedStateBetweenRuns is keepDeletedState for an object that is up to date: a run
// under way releases nothing, and its end reconciles the object again.
func (op *operation) keepDeletedStateBetweenRuns(ctx context.Context) error {
	var pending *runPendingError
	if err := op.keepDeletedState(ctx); err != nil && !errors.As(err, &pending) {
		return err
	}
	return nil
}

// watchDeletedStates reconciles the owner of a state object of kind that someone
// deleted, in either kind of object a state is kept in. Only metadata is watched.
func watchDeletedStates(b *builder.Builder, kind *kindSpec) *builder.Builder {
	deleted := builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetDeletionTimestamp() != nil
	}))
	owner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return stateOwner(kind, obj)
	})
	for _, storage := range tfstate.Storages {
		b = b.WatchesMetadata(storage.Object(), owner, deleted)
	}
	return b
}

// stateOwner is the object of kind whose state obj holds, by the name and labels every
// state object of a run carries (run.ID.StateName).
func stateOwner(kind *kindSpec, obj client.Object) []reconcile.Request {
	suffix := "." + string(kind.purpose) + ".tf-state"
	name, ok := strings.CutSuffix(obj.GetName(), suffix)
	if !ok || name == "" || obj.GetLabels()[run.LabelPurpose] != string(kind.purpose) {
		return nil
	}
	key := client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}
	if kind.clusterScoped {
		key.Namespace = ""
	}
	return []reconcile.Request{{NamespacedName: key}}
}
