package kinds_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
)

// etcdBackupSetup is a controller serving BackupEntries, the credentials Secret
// garden/backup of the local provider, a bucket's namespace for the entries, and a shoot
// namespace, the technical ID of the entries' names.
type etcdBackupSetup struct {
	c                   *controllerUnderTest
	runs, garden, shoot string
	bucket              string
	credentials         *corev1.Secret
}

func newEtcdBackupSetup(t *testing.T) *etcdBackupSetup {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	s := &etcdBackupSetup{runs: env.Namespace(t), garden: env.Namespace(t), shoot: env.Namespace(t)}
	kubeconfigSecret(t, s.garden, "backup")
	s.credentials = &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, keyOf(s.garden, "backup"), s.credentials)).To(Succeed())
	// The local entry's marker goes to its bucket's namespace, made here without a bucket.
	s.bucket = s.runs
	bucketNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bucket-" + s.bucket}}
	g.Expect(env.Client.Create(ctx, bucketNS)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucketNS) })
	s.c = startControllerWith(t, s.runs, workDir(t), env.Config, 2, servingKinds(s.runs))
	return s
}

// newEntry is a local BackupEntry of the shoot whose namespace is given, named as
// gardenlet names it, <prefix><technical ID>--<shoot UID>, of the credentials garden/backup.
func (s *etcdBackupSetup) newEntry(prefix, namespace, uid string) *extensionsv1alpha1.BackupEntry {
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + namespace + "--" + uid},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local", BucketName: s.bucket,
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: s.garden},
		},
	}
}

// entry creates newEntry's entry.
func (s *etcdBackupSetup) entry(t *testing.T, prefix, namespace, uid string) *extensionsv1alpha1.BackupEntry {
	t.Helper()
	return createEntry(t, s.newEntry(prefix, namespace, uid))
}

func createEntry(t *testing.T, entry *extensionsv1alpha1.BackupEntry) *extensionsv1alpha1.BackupEntry {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(context.Background(), entry)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), entry) })
	return entry
}

// etcdBackup reads the Secret name of the shoot's namespace as gardenlet's etcd
// deployment reads etcd-backup.
func etcdBackup(g Gomega, namespace, name string) *corev1.Secret {
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), keyOf(namespace, name), secret)).To(Succeed())
	return secret
}

// expectEtcdBackupOf expects the Secret to be what Gardener's extensions write from the
// entry's static credentials: those, and the bucket's name.
func expectEtcdBackupOf(g Gomega, secret *corev1.Secret, entry *extensionsv1alpha1.BackupEntry, credentials *corev1.Secret) {
	want := maps.Clone(credentials.Data)
	want["bucketName"] = []byte(entry.Spec.BucketName)
	g.Expect(secret.Data).To(Equal(want))
	g.Expect(secret.Annotations).To(Equal(map[string]string{"backup.gardener.cloud/created-by": entry.Name}))
	g.Expect(secret.Labels).To(BeEmpty())
}

// A BackupEntry's create writes etcd-backup in the shoot's namespace; a reconcile writes
// it again when it is gone, and follows the credentials.
func TestEtcdBackupSecretIsWrittenByReconcile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	entry := s.entry(t, "", s.shoot, "1b2c3d4e")
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	secret := etcdBackup(g, s.shoot, "etcd-backup")
	expectEtcdBackupOf(g, secret, entry, s.credentials)

	g.Expect(env.Client.Delete(ctx, secret)).To(Succeed())
	s.credentials.Data["region"] = []byte("local-2")
	g.Expect(env.Client.Update(ctx, s.credentials)).To(Succeed())
	annotateKind(g, entry, extension.OperationReconcile)
	g.Eventually(func(g Gomega) {
		expectEtcdBackupOf(g, etcdBackup(g, s.shoot, "etcd-backup"), entry, s.credentials)
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the reconcile wrote it again, with the changed credentials")
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(s.c.output.String()).NotTo(ContainSubstring(string(s.credentials.Data["kubeconfig"])), "the credentials reach no log")
}

// A restore, as on the destination seed of a control plane migration, writes etcd-backup.
func TestEtcdBackupSecretIsWrittenByRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	entry := s.entry(t, "", s.shoot, "1b2c3d4e")
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	annotateKind(g, entry, extension.OperationMigrate)
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeMigrate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(etcdBackup(g, s.shoot, "etcd-backup").Data).NotTo(BeEmpty(), "a migration leaves it, as Gardener's extensions do")
	// The destination's shoot namespace has none yet.
	g.Expect(env.Client.Delete(ctx, etcdBackup(g, s.shoot, "etcd-backup"))).To(Succeed())

	annotateKind(g, entry, extension.OperationRestore)
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateSucceeded)
	expectEtcdBackupOf(g, etcdBackup(g, s.shoot, "etcd-backup"), entry, s.credentials)
}

// The entry of a control plane migration's source backup writes source-etcd-backup, and
// leaves the shoot's etcd-backup alone.
func TestEtcdBackupSecretOfASourceEntryIsSourceEtcdBackup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	source := s.entry(t, "source-", s.shoot, "1b2c3d4e")
	waitForKind(t, source, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	expectEtcdBackupOf(g, etcdBackup(g, s.shoot, "source-etcd-backup"), source, s.credentials)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(s.shoot, "etcd-backup"), &corev1.Secret{}))).To(BeTrue())

	g.Expect(env.Client.Delete(ctx, source)).To(Succeed())
	waitKindGone(t, source)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(s.shoot, "source-etcd-backup"), &corev1.Secret{}))).To(BeTrue(), "its deletion removed it")
}

// An entry's deletion removes its etcd-backup; one another entry wrote last stays.
func TestEtcdBackupSecretIsRemovedByDeletion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	entry := s.entry(t, "", s.shoot, "1b2c3d4e")
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	etcdBackup(g, s.shoot, "etcd-backup")
	g.Expect(env.Client.Delete(ctx, entry)).To(Succeed())
	waitKindGone(t, entry)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(s.shoot, "etcd-backup"), &corev1.Secret{}))).To(BeTrue(), "the deletion removed it")

	// Another shoot's entry once wrote it (a shoot namespace reused): its deletion is the
	// other entry's to make.
	other := s.entry(t, "", s.shoot, "5f607a8b")
	waitForKind(t, other, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	secret := etcdBackup(g, s.shoot, "etcd-backup")
	secret.Annotations["backup.gardener.cloud/created-by"] = s.shoot + "--0f0e0d0c"
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, other)).To(Succeed())
	waitKindGone(t, other)
	g.Expect(etcdBackup(g, s.shoot, "etcd-backup").Annotations).To(HaveKeyWithValue("backup.gardener.cloud/created-by", s.shoot+"--0f0e0d0c"))
}

// A shoot namespace that is gone, or being deleted, gets no etcd-backup, and the entry
// succeeds all the same.
func TestEtcdBackupSecretIsNotWrittenIntoAGoneOrTerminatingNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	gone := s.entry(t, "", "shoot--gone--"+s.shoot, "1b2c3d4e")
	waitForKind(t, gone, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	// envtest runs no namespace controller: a deleted namespace stays Terminating.
	terminating := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.shoot}, terminating)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, terminating)).To(Succeed())
	entry := s.entry(t, "", s.shoot, "1b2c3d4e")
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(s.shoot, "etcd-backup"), &corev1.Secret{}))).To(BeTrue())
}

// A workload identity's credentials reach etcd-backup as Gardener's extensions write them:
// its config, the labels and annotations gardenlet's token requestor reads, and the token
// the requestor wrote into etcd-backup kept by every later reconcile, never the entry's.
func TestEtcdBackupSecretOfAWorkloadIdentityKeepsTheRequestedToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	// The runs read a workload identity's token from its Secret, which must be in the
	// namespace of the runs.
	w := newWorkloadIdentity(t, s.runs)
	wi := w.secret(g, w.token(g))
	wi.Name = "backup-wi"
	wi.Annotations = map[string]string{
		"workloadidentity.security.gardener.cloud/name": "backup", "workloadidentity.security.gardener.cloud/namespace": "garden-project",
	}
	g.Expect(env.Client.Create(ctx, wi)).To(Succeed())
	entry := s.newEntry("", s.shoot, "1b2c3d4e")
	entry.Spec.SecretRef = corev1.SecretReference{Namespace: wi.Namespace, Name: wi.Name}
	createEntry(t, entry)
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	secret := etcdBackup(g, s.shoot, "etcd-backup")
	g.Expect(secret.Data).To(Equal(map[string][]byte{"config": wi.Data["config"], "bucketName": []byte(s.bucket)}), "no token: the requestor writes etcd-backup's own")
	g.Expect(secret.Labels).To(Equal(map[string]string{
		"security.gardener.cloud/purpose": "workload-identity-token-requestor", "workloadidentity.security.gardener.cloud/provider": "local",
	}))
	g.Expect(secret.Annotations).To(Equal(map[string]string{
		"workloadidentity.security.gardener.cloud/name": "backup", "workloadidentity.security.gardener.cloud/namespace": "garden-project",
		"backup.gardener.cloud/created-by": entry.Name,
	}))

	// The token requestor writes the token and when it renewed it.
	secret.Data["token"] = []byte("requested-token")
	secret.Annotations["workloadidentity.security.gardener.cloud/token-renew-timestamp"] = "2026-01-01T00:00:00Z"
	secret.Annotations["unrelated"] = "x"
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	annotateKind(g, entry, extension.OperationReconcile)
	g.Eventually(func(g Gomega) {
		g.Expect(etcdBackup(g, s.shoot, "etcd-backup").Annotations).NotTo(HaveKey("unrelated"))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	secret = etcdBackup(g, s.shoot, "etcd-backup")
	g.Expect(secret.Data).To(HaveKeyWithValue("token", []byte("requested-token")))
	g.Expect(secret.Annotations).To(HaveKeyWithValue("workloadidentity.security.gardener.cloud/token-renew-timestamp", "2026-01-01T00:00:00Z"))
	g.Expect(s.c.output.String()).NotTo(ContainSubstring(string(wi.Data["token"])), "the token reaches no log")
}

// A bucket whose provider generates credentials of its own (generatedSecret) hands its
// entries, through gardenlet, that Secret instead of its own: the entry runs with it, and
// etcd-backup holds the generated credentials, the bucket's name and the provider's keys.
func TestEtcdBackupSecretOfAnEntryGivenItsBucketsGeneratedSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.garden, Name: "generating"}, Data: map[string][]byte{"token": []byte("the-bucket-owners-token")}}
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: s.runs + "-generating", Annotations: map[string]string{"backupbucket.extensions.gardener.cloud/generated-secret-namespace": s.garden}},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "generating"}, Region: "region-1",
			SecretRef: corev1.SecretReference{Namespace: s.garden, Name: own.Name},
		},
	}
	g.Expect(env.Client.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucket) })
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(bucket.Status.GeneratedSecretRef).NotTo(BeNil())
	generated := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, keyOf(bucket.Status.GeneratedSecretRef.Namespace, bucket.Status.GeneratedSecretRef.Name), generated)).To(Succeed())
	g.Expect(generated.Data).To(HaveKeyWithValue("bucketName", []byte(bucket.Name)))
	g.Expect(generated.Data).To(HaveKey("token"), "the bucket's own credentials, a sensitive output")
	g.Expect(generated.Data["token"]).NotTo(Equal(own.Data["token"]))
	status, err := json.Marshal(bucket.Status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(status)).NotTo(ContainSubstring(string(generated.Data["token"])), "never in the status")

	// gardenlet's BackupEntry controller: the generated Secret's data, as entry-<name>.
	name := s.shoot + "--1b2c3d4e"
	handed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.garden, Name: "entry-" + name}, Data: generated.Data}
	g.Expect(env.Client.Create(ctx, handed)).To(Succeed())
	entry := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "generating"}, Region: "region-1", BucketName: bucket.Name,
			SecretRef: corev1.SecretReference{Namespace: s.garden, Name: handed.Name},
		},
	}
	g.Expect(env.Client.Create(ctx, entry)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), entry) })
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(etcdBackup(g, s.shoot, "etcd-backup").Data).To(Equal(map[string][]byte{
		"token": generated.Data["token"], "bucketName": []byte(bucket.Name), "region": []byte("region-1"),
	}))
	g.Expect(env.Client.Delete(ctx, entry)).To(Succeed())
	waitKindGone(t, entry)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(s.shoot, "etcd-backup"), &corev1.Secret{}))).To(BeTrue())
	g.Expect(env.Client.Delete(ctx, bucket)).To(Succeed())
	waitKindGone(t, bucket)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(generated), &corev1.Secret{}))).To(BeTrue(), "the generated Secret went with the bucket")
}

// A generated Secret an earlier version wrote for a provider that declares none now goes
// at the bucket's next reconcile, and its status no longer names it: gardenlet would go
// on handing it to the entries instead of the bucket's credentials.
func TestAGeneratedSecretNoLongerDeclaredIsRemovedSoEntriesGetTheBucketsCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newEtcdBackupSetup(t)
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: s.runs + "-earlier"},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
			SecretRef: corev1.SecretReference{Namespace: s.garden, Name: "backup"},
		},
	}
	g.Expect(env.Client.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucket) })
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(bucket.Status.GeneratedSecretRef).To(BeNil())

	earlier := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.garden, Name: "generated-bucket-" + bucket.Name},
		Data: map[string][]byte{"bucketName": []byte("bucket-" + bucket.Name), "region": []byte("local")}}
	// The earlier version wrote it controlled by the bucket, as a bucket's own Secret.
	g.Expect(controllerutil.SetControllerReference(bucket, earlier, env.Client.Scheme())).To(Succeed())
	g.Expect(env.Client.Create(ctx, earlier)).To(Succeed())
	bucket.Status.GeneratedSecretRef = &corev1.SecretReference{Namespace: earlier.Namespace, Name: earlier.Name}
	g.Expect(env.Client.Status().Update(ctx, bucket)).To(Succeed())
	annotateKind(g, bucket, extension.OperationReconcile)
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(bucket.Status.GeneratedSecretRef).To(BeNil())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(earlier), &corev1.Secret{}))).To(BeTrue())
}
