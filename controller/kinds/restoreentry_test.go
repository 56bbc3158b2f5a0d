package kinds_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/test/testenv"
)

// createdBucket is a local BackupBucket of the secret garden/backup that a controller
// serving the kinds created.
func createdBucket(t *testing.T, name, garden string) *extensionsv1alpha1.BackupBucket {
	t.Helper()
	ctx := context.Background()
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{kinds.AnnotationGeneratedSecretNamespace: garden}},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
		},
	}
	NewWithT(t).Expect(env.Client.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucket) })
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	return bucket
}

// waitForKindDone waits until obj's last operation of the given type ended: succeeded,
// failed, or refused by the destroy guard; and reads obj anew.
func waitForKindDone(t *testing.T, obj kindObject, opType extensionsv1alpha1.LastOperationType) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		last := obj.GetExtensionStatus().LastOperation
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Type).To(Equal(opType), "last operation: %+v", last)
		refused := last.State == extensionsv1alpha1.LastOperationStateError && strings.Contains(last.Description, run.ErrDestroyProtected.Error())
		g.Expect(refused || last.State == extensionsv1alpha1.LastOperationStateSucceeded || last.State == extensionsv1alpha1.LastOperationStateFailed).
			To(BeTrue(), "last operation: %+v", last)
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// kindCondition is the condition of type t of obj, nil when it has none.
func kindCondition(obj kindObject, t extensionsv1alpha1.ConditionType) *extensionsv1alpha1.Condition {
	for _, c := range obj.GetExtensionStatus().Conditions {
		if c.Type == t {
			return &c
		}
	}
	return nil
}

// writtenBackup is what etcd's backup would be: an object in the namespace of the
// entry's prefix, written by another than the controller.
func writtenBackup(t *testing.T, backupsNS string) types.UID {
	t.Helper()
	backup := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: backupsNS, Name: "full-snapshot-1"}, Data: map[string]string{"etcd": "snapshot"}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), backup)).To(Succeed())
	return backup.UID
}

// backupKept checks that the backup writtenBackup wrote is still there, in a namespace
// that is not being deleted.
func backupKept(g Gomega, backupsNS string, uid types.UID, why string) {
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: backupsNS}, ns)).To(Succeed(), why)
	g.Expect(ns.DeletionTimestamp).To(BeNil(), why)
	backup := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), keyOf(backupsNS, "full-snapshot-1"), backup)).To(Succeed(), why)
	g.Expect(backup.UID).To(Equal(uid), why)
}

// Gardener restores a shoot's BackupEntry on the destination seed with that seed's
// bucket, and reads the backups through a "source-" entry of the source seed's bucket.
// The restored entry replaces nothing: its backups stay where they are, in the namespace
// the source entry reads, and it becomes ready.
func TestARestoredBackupEntryWithTheNewSeedsBucketKeepsItsBackupsWhereTheSourceEntryReadsThem(t *testing.T) {
	testRestoreWithTheNewSeedsBucket(t)
}

// The same with OpenTofu: the entry's namespace is what its ConfigMap recorded on either.
func TestARestoredBackupEntryWithTheNewSeedsBucketKeepsItsBackupsOnOpenTofu(t *testing.T) {
	tofu := testenv.OpenTofu(t)
	testRestoreWithTheNewSeedsBucket(t, func(a *controllerSetup) {
		e := a.Executor.(*executor.LocalExecutor)
		e.Settings.Terraform, e.Settings.OpenTofu = tofu, true
	})
}

func testRestoreWithTheNewSeedsBucket(t *testing.T, opts ...actuatorOption) {
	g := NewWithT(t)
	ctx := context.Background()
	controllerNS, garden := env.Namespace(t), env.Namespace(t)
	startControllerWith(t, controllerNS, workDir(t), env.Config, 2, append([]actuatorOption{servingKinds(controllerNS)}, opts...)...)
	entry, backupsNS := createdEntry(t, controllerNS, garden)
	sourceBucket := entry.Spec.BucketName
	backup := writtenBackup(t, backupsNS)
	namespaceUID := ownedNamespace(g, backupsNS, string(entry.UID)).UID
	markers := entryMarkers(g, "bucket-"+sourceBucket)
	g.Expect(markers).To(HaveLen(1))
	destinationBucket := createdBucket(t, controllerNS+"-dest", garden)

	annotateKind(g, entry, extension.OperationMigrate)
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeMigrate, extensionsv1alpha1.LastOperationStateSucceeded)
	// The destination seed's gardenlet creates the entry with its own bucket, to restore.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(entry), entry)).To(Succeed())
		if entry.Annotations == nil {
			entry.Annotations = map[string]string{}
		}
		entry.Annotations[extension.AnnotationOperation] = extension.OperationRestore
		entry.Spec.BucketName = destinationBucket.Name
		g.Expect(env.Client.Update(ctx, entry)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	waitForKindDone(t, entry, extensionsv1alpha1.LastOperationTypeRestore)
	g.Expect(entry.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "last error: %+v", entry.Status.LastError)
	g.Expect(entry.Status.LastError).To(BeNil())
	plan := kindCondition(entry, kinds.ConditionLastPlan)
	g.Expect(plan).NotTo(BeNil())
	g.Expect(plan.Message).To(And(ContainSubstring("0 to replace"), ContainSubstring("0 to destroy")), "the restore replaced nothing")

	backupKept(g, backupsNS, backup, "the restore kept the entry's backups")
	g.Expect(ownedNamespace(g, backupsNS, string(entry.UID)).UID).To(Equal(namespaceUID), "the namespace of the prefix is the one the entry created")
	after := entryMarkers(g, "bucket-"+sourceBucket)
	g.Expect(after).To(HaveLen(1))
	g.Expect(after[0].UID).To(Equal(markers[0].UID), "the entry's marker stays where the entry was created")
	g.Expect(after[0].Data).To(HaveKeyWithValue("backups", backupsNS))

	// The source entry, of the source seed's bucket, reads the restored entry's backups.
	source := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: "source-" + entry.Name}, Spec: entry.Spec}
	source.Spec.BucketName = sourceBucket
	g.Expect(env.Client.Create(ctx, source)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), source) })
	waitForKind(t, source, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	var read []string
	for _, m := range entryMarkers(g, "bucket-"+sourceBucket) {
		if m.Data["prefix"] == entry.Name && m.UID != markers[0].UID {
			read = append(read, m.Data["backups"])
		}
	}
	g.Expect(read).To(ConsistOf(backupsNS), "the source entry reads the namespace that holds the backups")
	g.Expect(env.Client.Delete(ctx, source)).To(Succeed())
	waitKindGone(t, source)
	backupKept(g, backupsNS, backup, "the source entry's deletion left the backups")

	// Reconciled again in its new bucket, the entry still replaces nothing.
	annotateKind(g, entry, extension.OperationReconcile)
	waitForKindDone(t, entry, extensionsv1alpha1.LastOperationTypeReconcile)
	g.Expect(entry.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "last error: %+v", entry.Status.LastError)
	g.Expect(kindCondition(entry, kinds.ConditionLastPlan).Message).To(And(ContainSubstring("0 to replace"), ContainSubstring("0 to destroy")))
	backupKept(g, backupsNS, backup, "a reconcile in the new bucket kept the backups")
}

// A plan that would replace what holds a BackupEntry's backups is refused, and the
// refusal names the BackupEntry and advises nothing that would destroy them: here the
// entry's marker is gone (as the deletion of the bucket it was created in removes it) and
// the entry names another bucket.
func TestARefusedReplaceOfABackupEntrysBackupsNamesTheEntryAndAdvisesNoDestroy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllerNS, garden := env.Namespace(t), env.Namespace(t)
	startControllerWith(t, controllerNS, workDir(t), env.Config, 2, servingKinds(controllerNS))
	entry, backupsNS := createdEntry(t, controllerNS, garden)
	backup := writtenBackup(t, backupsNS)
	for _, m := range entryMarkers(g, "bucket-"+entry.Spec.BucketName) {
		g.Expect(env.Client.Delete(ctx, &m)).To(Succeed())
	}

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(entry), entry)).To(Succeed())
		entry.Spec.BucketName = controllerNS + "-other"
		g.Expect(env.Client.Update(ctx, entry)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	waitForKindDone(t, entry, extensionsv1alpha1.LastOperationTypeReconcile)
	g.Expect(entry.Status.LastOperation.State).NotTo(Equal(extensionsv1alpha1.LastOperationStateSucceeded))

	plan := kindCondition(entry, kinds.ConditionLastPlan)
	g.Expect(plan).NotTo(BeNil())
	g.Expect(plan.Reason).To(Equal(kinds.ReasonDestroyProtected))
	for _, message := range []string{plan.Message, entry.Status.LastError.Description} {
		g.Expect(message).To(ContainSubstring("kubectl_manifest.backups (replace)"))
		g.Expect(message).To(ContainSubstring("the BackupEntry's"), "the message names the kind it is about")
		g.Expect(message).NotTo(ContainSubstring("Infrastructure"))
		g.Expect(message).NotTo(ContainSubstring(kinds.AnnotationAllowDestroy), "no advice to allow a plan that destroys the backups")
	}
	backupKept(g, backupsNS, backup, "the refused plan changed nothing")
}
