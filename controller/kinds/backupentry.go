// The BackupEntry: a shoot's prefix of a BackupBucket, rendered from
// templates/<type>/backupentry/. It is cluster-scoped: its runs are kept in the
// controller's namespace (Actuator.Namespace). After its apply it writes the shoot's
// etcd-backup Secret, which its deletion removes first; a provider may declare a purge,
// which its destroy runs before terraform (terraform/terraformer/purge.go,
// terraform/purge).
//
// A reconcile reads, from the reconciler's call (controller/extension/operation.go):
// actuator.go (kindActuator.Reconcile) → apply.go (its phases, in order) → runs.go (the
// run submitted, its outcome read back) → terraform/executor (scheduler.go, pipeline.go,
// local.go or pod.go) → terraform/terraformer (runner.go, apply.go); apply.go's phase
// writeEtcdBackup, here, writes the etcd-backup Secret from the outputs.
// A deletion reads: actuator.go (kindActuator.Delete) → delete.go (its phases, in order;
// the first, removeEtcdBackup, is here) → runs.go → terraform/executor (the same three
// files) → terraform/terraformer (runner.go, destroy.go): 8 files after the reconciler's,
// and this one.

package kinds

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
)

var backupEntryKind = templateKind("BackupEntry", templates.KindBackupEntry, true,
	func() Subject { return &extensionsv1alpha1.BackupEntry{} }, func() client.ObjectList { return &extensionsv1alpha1.BackupEntryList{} })

// The Secret gardenlet's etcd deployment reads in a shoot's namespace whenever the seed
// keeps backups (its key bucketName names the bucket), as Gardener's extensions write it
// from each BackupEntry: Gardener's BackupSecretName, BackupSourcePrefix and the
// annotation that names the entry that wrote it.
const (
	etcdBackupSecretName = "etcd-backup"
	backupSourcePrefix   = "source"
	annotationCreatedBy  = "backup.gardener.cloud/created-by"
)

// What gardenlet's token requestor reads on a Secret it fills with a WorkloadIdentity's
// token (Gardener's security constants), and the key of the identity's config.
const (
	labelPurpose                    = "security.gardener.cloud/purpose"
	labelPurposeTokenRequestor      = "workload-identity-token-requestor"
	labelWorkloadIdentityProvider   = "workloadidentity.security.gardener.cloud/provider"
	annotationWorkloadIdentityName  = "workloadidentity.security.gardener.cloud/name"
	annotationWorkloadIdentityNS    = "workloadidentity.security.gardener.cloud/namespace"
	annotationWorkloadIdentityObj   = "workloadidentity.security.gardener.cloud/context-object"
	annotationTokenRenewTimestamp   = "workloadidentity.security.gardener.cloud/token-renew-timestamp"
	dataKeyWorkloadIdentityConfig   = "config"
	dataKeyWorkloadIdentityTokenKey = "token"
)

// etcdBackupSecretKey is where a BackupEntry's etcd-backup Secret goes: the shoot's
// namespace, its technical ID, which the entry's name holds before "--<shoot UID>"; a
// source entry (a control plane migration's) writes source-etcd-backup.
func etcdBackupSecretKey(entryName string) client.ObjectKey {
	name := etcdBackupSecretName
	if strings.HasPrefix(entryName, backupSourcePrefix) {
		name = backupSourcePrefix + "-" + etcdBackupSecretName
	}
	trimmed := strings.TrimPrefix(entryName, backupSourcePrefix+"-")
	tokens := strings.Split(trimmed, "--")
	return client.ObjectKey{Namespace: strings.TrimSuffix(trimmed, "--"+tokens[len(tokens)-1]), Name: name}
}

// writeEtcdBackup writes a BackupEntry's etcd-backup Secret after its apply: the entry's
// credentials, bucketName, and the keys the provider declares (etcdBackupSecret).
func (op *operation) writeEtcdBackup(ctx context.Context, s *applyScope) error {
	entry, ok := op.obj.(*extensionsv1alpha1.BackupEntry)
	if !ok {
		return nil
	}
	kind, ok := s.provider.(servedKind)
	if !ok {
		return nil
	}
	extra, err := kind.EtcdBackupData(s.outputs)
	if err != nil {
		return err
	}
	key := etcdBackupSecretKey(entry.Name)
	log := ctrl.LoggerFrom(ctx).WithValues("etcdBackupSecret", key)
	if live, err := op.namespaceLive(ctx, key.Namespace); err != nil || !live {
		if err == nil {
			log.Info("etcdBackupSecretSkipped", "reason", "the shoot's namespace is gone or being deleted")
		}
		return err
	}
	existing := &corev1.Secret{}
	if err := op.actuator.APIReader.Get(ctx, key, existing); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading the Secret %s: %w", key, err)
		}
		existing = nil
	}
	secret, err := etcdBackupSecret(entry, s.secret, existing, extra)
	if err != nil {
		return err
	}
	if existing == nil {
		if err := op.actuator.Client.Create(ctx, secret); err != nil {
			return fmt.Errorf("creating the Secret %s: %w", key, err)
		}
		return nil
	}
	if equality.Semantic.DeepEqual(existing, secret) {
		return nil
	}
	// The token requestor may write the token meanwhile: a patch of another version fails
	// and is retried, never undoing its write.
	if err := op.actuator.Client.Patch(ctx, secret, client.MergeFromWithOptions(existing, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the Secret %s: %w", key, err)
	}
	return nil
}

// namespaceLive says whether the namespace exists and is not being deleted: Gardener's
// extensions write no etcd-backup Secret into a namespace on its way out.
func (op *operation) namespaceLive(ctx context.Context, name string) (bool, error) {
	ns := &corev1.Namespace{}
	if err := op.actuator.APIReader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading the shoot's namespace %s of the etcd-backup Secret: %w", name, err)
	}
	return ns.DeletionTimestamp.IsZero(), nil
}

// etcdBackupSecret is existing (nil: a new Secret) as the entry's credentials make it.
// Static credentials are copied; of a workload identity's only the config is, and the
// token the token requestor wrote into the Secret stays, with the labels and annotations
// the requestor reads.
func etcdBackupSecret(entry *extensionsv1alpha1.BackupEntry, credentials *corev1.Secret, existing *corev1.Secret, extra map[string][]byte) (*corev1.Secret, error) {
	key := etcdBackupSecretKey(entry.Name)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if existing != nil {
		secret = existing.DeepCopy()
	}
	data := map[string][]byte{}
	secret.Labels, secret.Annotations = nil, map[string]string{}
	if templates.IsWorkloadIdentity(credentials) {
		if err := workloadIdentityMetadata(secret, credentials, existing); err != nil {
			return nil, err
		}
		if config, ok := credentials.Data[dataKeyWorkloadIdentityConfig]; ok {
			data[dataKeyWorkloadIdentityConfig] = config
		}
		if existing != nil {
			if token, ok := existing.Data[dataKeyWorkloadIdentityTokenKey]; ok {
				data[dataKeyWorkloadIdentityTokenKey] = token
			}
		}
	} else {
		maps.Copy(data, credentials.Data)
	}
	data[templates.EtcdBackupBucketNameKey] = []byte(entry.Spec.BucketName)
	maps.Copy(data, extra)
	secret.Annotations[annotationCreatedBy] = entry.Name
	secret.Data = data
	return secret, nil
}

// workloadIdentityMetadata gives secret the labels and annotations that tell gardenlet's
// token requestor which WorkloadIdentity's token to write into it, from credentials;
// of the Secret's own it keeps only when the token was last renewed.
func workloadIdentityMetadata(secret, credentials, existing *corev1.Secret) error {
	if existing != nil {
		if renewed, ok := existing.Annotations[annotationTokenRenewTimestamp]; ok {
			secret.Annotations[annotationTokenRenewTimestamp] = renewed
		}
	}
	for _, a := range []string{annotationWorkloadIdentityName, annotationWorkloadIdentityNS} {
		value, ok := credentials.Annotations[a]
		if !ok {
			return extension.InvalidInput(ReasonInvalidConfiguration, "spec.secretRef: the workload identity's Secret has no annotation %s, which the etcd-backup Secret needs", a)
		}
		secret.Annotations[a] = value
	}
	if value, ok := credentials.Annotations[annotationWorkloadIdentityObj]; ok {
		secret.Annotations[annotationWorkloadIdentityObj] = value
	}
	provider, ok := credentials.Labels[labelWorkloadIdentityProvider]
	if !ok {
		return extension.InvalidInput(ReasonInvalidConfiguration, "spec.secretRef: the workload identity's Secret has no label %s, which the etcd-backup Secret needs", labelWorkloadIdentityProvider)
	}
	secret.Labels = map[string]string{labelPurpose: labelPurposeTokenRequestor, labelWorkloadIdentityProvider: provider}
	return nil
}

// deleteEtcdBackup removes a BackupEntry's etcd-backup Secret, first in its deletion as
// Gardener's extensions remove it; one another entry wrote stays.
func (op *operation) deleteEtcdBackup(ctx context.Context) error {
	entry, ok := op.obj.(*extensionsv1alpha1.BackupEntry)
	if !ok {
		return nil
	}
	key := etcdBackupSecretKey(entry.Name)
	secret := &corev1.Secret{}
	if err := op.actuator.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the Secret %s: %w", key, err)
	}
	if createdBy, ok := secret.Annotations[annotationCreatedBy]; ok && createdBy != entry.Name {
		ctrl.LoggerFrom(ctx).Info("etcdBackupSecretKept", "etcdBackupSecret", key, "createdBy", createdBy)
		return nil
	}
	err := op.actuator.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the Secret %s: %w", key, err)
	}
	return nil
}

func (op *operation) removeEtcdBackup(ctx context.Context, _ *deleteScope) error {
	return op.deleteEtcdBackup(ctx)
}
