package extension

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run/tracing"
)

// patchStatus writes what changed in the status since the last write. The conditions
// are shared with other writers (a drift or health check): when this operation changed
// some, the patch carries an optimistic lock, and on a conflict the conditions of the
// others are read again, so that only the types changed here are written.
func (op *operation[T]) patchStatus(ctx context.Context) error {
	if op.skipped {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// Metadata patched since the base was taken must not enter the patch: a changed
		// resourceVersion would turn it into an optimistic lock.
		base := op.base.DeepCopyObject().(T)
		copyMeta(base, op.obj)
		if data, err := client.MergeFrom(base).Data(op.obj); err == nil && string(data) == "{}" {
			return nil
		}
		owned := changedConditionTypes(base.GetExtensionStatus().Conditions, op.obj.GetExtensionStatus().Conditions)
		var patch client.Patch = client.MergeFrom(base)
		if len(owned) > 0 {
			patch = client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		}
		patchCtx, span := tracing.Start(ctx, "status")
		err := op.r.Client.Status().Patch(patchCtx, op.obj, patch)
		tracing.Fail(span, err)
		span.End()
		switch {
		case err == nil:
			op.base = op.obj.DeepCopyObject().(T)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			current := op.r.NewObject()
			if getErr := op.r.APIReader.Get(ctx, client.ObjectKeyFromObject(op.obj), current); getErr != nil {
				return client.IgnoreNotFound(getErr)
			}
			ours := op.obj.GetExtensionStatus().Conditions
			theirs := current.GetExtensionStatus().Conditions
			op.obj.GetExtensionStatus().Conditions = mergeConditions(theirs, ours, owned)
			op.base.GetExtensionStatus().Conditions = slices.Clone(theirs)
			copyMeta(op.obj, current)
			return err
		default:
			return fmt.Errorf("patching the status: %w", err)
		}
	})
}

// changedConditionTypes are the types whose condition differs between before and after,
// added and removed ones included.
func changedConditionTypes(before, after []extensionsv1alpha1.Condition) []extensionsv1alpha1.ConditionType {
	var changed []extensionsv1alpha1.ConditionType
	find := func(list []extensionsv1alpha1.Condition, t extensionsv1alpha1.ConditionType) *extensionsv1alpha1.Condition {
		for i := range list {
			if list[i].Type == t {
				return &list[i]
			}
		}
		return nil
	}
	for i := range after {
		if old := find(before, after[i].Type); old == nil || !equality.Semantic.DeepEqual(*old, after[i]) {
			changed = append(changed, after[i].Type)
		}
	}
	for i := range before {
		if find(after, before[i].Type) == nil {
			changed = append(changed, before[i].Type)
		}
	}
	return changed
}

// mergeConditions is theirs with the conditions of the owned types taken from ours.
func mergeConditions(theirs, ours []extensionsv1alpha1.Condition, owned []extensionsv1alpha1.ConditionType) []extensionsv1alpha1.Condition {
	merged := slices.DeleteFunc(slices.Clone(theirs), func(c extensionsv1alpha1.Condition) bool { return slices.Contains(owned, c.Type) })
	for _, c := range ours {
		if slices.Contains(owned, c.Type) {
			merged = append(merged, c)
		}
	}
	return merged
}

// patchMetadata changes the object's metadata with a patch that fails when anybody else
// wrote the object since it was read; then it reads the object again and changes that,
// so that it never overwrites what Gardener or another controller set meanwhile. change
// returns false when there is nothing to change.
func (op *operation[T]) patchMetadata(ctx context.Context, change func(obj T) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed := op.obj.DeepCopyObject().(T)
		if !change(changed) {
			return nil
		}
		err := op.r.Client.Patch(ctx, changed, client.MergeFromWithOptions(op.obj.DeepCopyObject().(T), client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			copyMeta(op.obj, changed)
			return nil
		case apierrors.IsNotFound(err) && !op.obj.GetDeletionTimestamp().IsZero():
			return nil
		case apierrors.IsConflict(err):
			current := op.r.NewObject()
			if getErr := op.r.APIReader.Get(ctx, client.ObjectKeyFromObject(op.obj), current); getErr != nil {
				return client.IgnoreNotFound(getErr)
			}
			copyMeta(op.obj, current)
			return err
		default:
			return fmt.Errorf("patching the metadata: %w", err)
		}
	})
}

// copyMeta takes over the metadata a patch may change, leaving the status being built.
func copyMeta(dst, src metav1.Object) {
	dst.SetResourceVersion(src.GetResourceVersion())
	dst.SetGeneration(src.GetGeneration())
	dst.SetAnnotations(src.GetAnnotations())
	dst.SetLabels(src.GetLabels())
	dst.SetFinalizers(src.GetFinalizers())
	dst.SetDeletionTimestamp(src.GetDeletionTimestamp())
	dst.SetOwnerReferences(src.GetOwnerReferences())
}

func (op *operation[T]) addFinalizer(ctx context.Context) error {
	return op.patchMetadata(ctx, func(obj T) bool { return controllerutil.AddFinalizer(obj, op.r.Finalizer) })
}

func (op *operation[T]) removeFinalizer(ctx context.Context) error {
	return op.patchMetadata(ctx, func(obj T) bool { return controllerutil.RemoveFinalizer(obj, op.r.Finalizer) })
}

// removeOperationAnnotation removes Gardener's request for an operation when it still
// asks for the one handled.
func (op *operation[T]) removeOperationAnnotation(ctx context.Context, handled string) error {
	return op.patchMetadata(ctx, func(obj T) bool {
		annotations := obj.GetAnnotations()
		if annotations[AnnotationOperation] != handled {
			return false
		}
		delete(annotations, AnnotationOperation)
		obj.SetAnnotations(annotations)
		return true
	})
}
