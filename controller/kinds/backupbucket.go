// The BackupBucket: a seed's bucket for its shoots' etcd backups, rendered from
// templates/<type>/backupbucket/. It is cluster-scoped: its runs are kept in the
// controller's namespace (Actuator.Namespace). Besides its status, an apply may write a
// Secret its provider generates for it (status.generatedSecretRef), which its deletion
// removes last.
//
// A reconcile reads, from the reconciler's call (controller/extension/operation.go):
// actuator.go (kindActuator.Reconcile) → apply.go (its phases, in order) → runs.go (the
// run submitted, its outcome read back) → terraform/executor (scheduler.go, pipeline.go,
// local.go or pod.go) → terraform/terraformer (runner.go, apply.go); the outputs come back
// through kind.go (servedKind.report, reportKindStatus) into reportGeneratedSecret, here.
// A deletion reads: actuator.go (kindActuator.Delete) → delete.go (its phases, in order;
// the last, removeGenerated, is here) → runs.go → terraform/executor (the same three
// files) → terraform/terraformer (runner.go, destroy.go): 8 files after the reconciler's,
// and this one.

package kinds

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
)

var backupBucketKind = templateKind("BackupBucket", templates.KindBackupBucket, true,
	func() Subject { return &extensionsv1alpha1.BackupBucket{} }, func() client.ObjectList { return &extensionsv1alpha1.BackupBucketList{} })

// AnnotationGeneratedSecretNamespace names the namespace of a BackupBucket's generated
// Secret, as Gardener's extensions read it; GardenNamespace without it.
const AnnotationGeneratedSecretNamespace = "backupbucket.extensions.gardener.cloud/generated-secret-namespace"

// GardenNamespace holds a BackupBucket's generated Secret unless its annotation names
// another namespace.
const GardenNamespace = "garden"

// generatedSecretKey is the Secret a BackupBucket's status.generatedSecretRef names, as
// Gardener's extensions name it.
func generatedSecretKey(bucket *extensionsv1alpha1.BackupBucket) client.ObjectKey {
	namespace := bucket.Annotations[AnnotationGeneratedSecretNamespace]
	if namespace == "" {
		namespace = GardenNamespace
	}
	return client.ObjectKey{Namespace: namespace, Name: "generated-bucket-" + bucket.Name}
}

// reportGeneratedSecret writes the bucket's generated Secret before its status names it,
// or deletes one it no longer declares.
func (op *operation) reportGeneratedSecret(ctx context.Context, bucket *extensionsv1alpha1.BackupBucket, status *templates.KindStatus) error {
	if status.GeneratedSecret == nil {
		if bucket.Status.GeneratedSecretRef == nil {
			return nil
		}
		// One the provider generated before, when it still declared one: gardenlet
		// would go on handing it to the entries instead of the bucket's credentials.
		return op.deleteGeneratedSecret(ctx)
	}
	key, err := op.writeGeneratedSecret(ctx, bucket, status.GeneratedSecret)
	if err != nil {
		return err
	}
	bucket.Status.GeneratedSecretRef = &corev1.SecretReference{Namespace: key.Namespace, Name: key.Name}
	return nil
}

// writeGeneratedSecret creates or updates a BackupBucket's generated Secret; the
// BackupBucket owns it by a controller reference with its UID, and its deletion deletes it.
// A cluster-scoped owner of a namespaced Secret is one the garbage collector follows, so
// the reference needs no label beside it. A Secret of the name that the bucket does not
// own is someone else's: it is neither taken over nor written.
func (op *operation) writeGeneratedSecret(ctx context.Context, bucket *extensionsv1alpha1.BackupBucket, data map[string][]byte) (client.ObjectKey, error) {
	key := generatedSecretKey(bucket)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	_, err := controllerutil.CreateOrPatch(ctx, op.actuator.Client, secret, func() error {
		if secret.ResourceVersion != "" && !metav1.IsControlledBy(secret, bucket) {
			return extension.InvalidInput(ReasonInvalidConfiguration, "metadata.annotations[%s]: the Secret %s exists and BackupBucket %s does not own it: choose another namespace or remove the Secret",
				AnnotationGeneratedSecretNamespace, key, bucket.Name)
		}
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels["app.kubernetes.io/managed-by"] = "terraseed"
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = data
		return controllerutil.SetControllerReference(bucket, secret, op.actuator.Client.Scheme())
	})
	if err != nil {
		return key, fmt.Errorf("writing the generated Secret %s of status.generatedSecretRef: %w", key, err)
	}
	return key, nil
}

// deleteGeneratedSecret removes a BackupBucket's generated Secret once its bucket is gone.
func (op *operation) deleteGeneratedSecret(ctx context.Context) error {
	bucket, ok := op.obj.(*extensionsv1alpha1.BackupBucket)
	if !ok {
		return nil
	}
	key := generatedSecretKey(bucket)
	if ref := bucket.Status.GeneratedSecretRef; ref != nil {
		key = client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	}
	secret := &corev1.Secret{}
	if err := op.actuator.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			bucket.Status.GeneratedSecretRef = nil
			return nil
		}
		return fmt.Errorf("reading the generated Secret %s: %w", key, err)
	}
	// Only the Secret the bucket owns goes: the status may name any Secret.
	if metav1.IsControlledBy(secret, bucket) {
		uid := secret.UID
		err := op.actuator.Client.Delete(ctx, secret, client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the generated Secret %s: %w", key, err)
		}
	}
	bucket.Status.GeneratedSecretRef = nil
	return nil
}

func (op *operation) removeGenerated(ctx context.Context, _ *deleteScope) error {
	return op.deleteGeneratedSecret(ctx)
}
