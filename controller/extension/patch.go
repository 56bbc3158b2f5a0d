package extension

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// patchStatus writes what changed in the status since the last write.
func (op *operation[T]) patchStatus(ctx context.Context) error {
	if op.skipped {
		return nil
	}
	// Metadata patched since the base was taken must not enter the patch: a changed
	// resourceVersion would turn it into an optimistic lock.
	base := op.base.DeepCopyObject().(T)
	copyMeta(base, op.obj)
	patch := client.MergeFrom(base)
	if data, err := patch.Data(op.obj); err == nil && string(data) == "{}" {
		return nil
	}
	if err := op.r.Client.Status().Patch(ctx, op.obj, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching the status: %w", err)
	}
	op.base = op.obj.DeepCopyObject().(T)
	return nil
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
