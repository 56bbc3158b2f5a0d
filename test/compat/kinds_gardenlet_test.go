package compat_test

import (
	"context"
	"net"
	"testing"
	"time"

	extensionsbackupentry "github.com/gardener/gardener/extensions/pkg/controller/backupentry"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/component/extensions/backupentry"
	"github.com/gardener/gardener/pkg/component/extensions/bastion"
	"github.com/gardener/gardener/pkg/component/extensions/dnsrecord"
	"github.com/gardener/gardener/pkg/controllerutils"
	"github.com/gardener/gardener/pkg/extensions"
	kubernetesutils "github.com/gardener/gardener/pkg/utils/kubernetes"
	fakesecretsmanager "github.com/gardener/gardener/pkg/utils/secrets/manager/fake"
	sshutils "github.com/gardener/gardener/pkg/utils/ssh"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These tests drive terraseed's controllers of the kinds besides the Infrastructure with
// gardenlet's own code: the DNSRecord, BackupEntry and Bastion components
// (pkg/component/extensions/...), and for the BackupBucket, which gardenlet's controller
// writes itself, the extension helpers that controller waits and deletes with.

// localRecords are the records the local provider made in the seed, by name.
func localRecords(g Gomega, sh *shootInSeed) map[string]corev1.ConfigMap {
	list := &corev1.ConfigMapList{}
	g.Expect(sh.seed.client.List(sh.ctx, list, client.InNamespace("default"), client.HasLabels{"dns.terraseed.io/zone"})).To(Succeed())
	records := map[string]corev1.ConfigMap{}
	for _, cm := range list.Items {
		records[cm.Data["name"]] = cm
	}
	return records
}

func TestGardenletDeploysMigratesRestoresAndDestroysADNSRecord(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "dns", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := sh.ctx
	name := "api." + sh.namespace + ".compat.example.com"
	component := func(values []string) dnsrecord.Interface {
		return dnsrecord.New(testr.New(t), sh.seed.client, &dnsrecord.Values{
			Namespace: sh.namespace, Name: sh.shoot.Name + "-external", SecretName: "cloudprovider", UseExistingSecret: true,
			Type: "local", DNSName: name, RecordType: gardenextensionsv1alpha1.DNSRecordTypeA, Values: values,
			AnnotateOperation: true,
		}, waitInterval, waitSevereThreshold, waitTimeout, nil)
	}
	key := client.ObjectKey{Namespace: sh.namespace, Name: sh.shoot.Name + "-external"}
	get := func(g Gomega) *gardenextensionsv1alpha1.DNSRecord {
		record := &gardenextensionsv1alpha1.DNSRecord{}
		g.Expect(sh.seed.client.Get(ctx, key, record)).To(Succeed())
		return record
	}

	// Create, as the shoot's reconcile deploys its API server's record.
	record := component([]string{"192.0.2.10"})
	g.Expect(record.Deploy(ctx)).To(Succeed())
	g.Expect(record.Wait(ctx)).To(Succeed(), func() string { return toJSON(get(g).Status) })
	created := get(g)
	g.Expect(created.Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeCreate))
	g.Expect(created.Status.Zone).To(Equal(ptr(sh.namespace + ".compat.example.com")))
	g.Expect(localRecords(g, sh)).To(HaveKeyWithValue(name, HaveField("Data", HaveKeyWithValue("values", `["192.0.2.10"]`))))

	// The load balancer's address changed.
	record = component([]string{"192.0.2.11"})
	g.Expect(record.Deploy(ctx)).To(Succeed())
	g.Expect(record.Wait(ctx)).To(Succeed(), func() string { return toJSON(get(g).Status) })
	g.Expect(get(g).Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeReconcile))
	changed := localRecords(g, sh)[name]
	g.Expect(changed.Data).To(HaveKeyWithValue("values", `["192.0.2.11"]`))

	// Migrate; the ShootState gardenlet computes carries the state; the source seed deletes
	// the migrated record, destroying nothing; the destination restores it.
	g.Expect(record.Migrate(ctx)).To(Succeed())
	g.Expect(record.WaitMigrate(ctx)).To(Succeed(), func() string { return toJSON(get(g).Status) })
	migrated := get(g)
	g.Expect(migrated.Status.State).NotTo(BeNil())
	decodeInfrastructureState(g, migrated.Status.State)
	shootState := sh.persistShootState(g)
	var entry *gardencorev1beta1.ExtensionResourceState
	for i, e := range shootState.Spec.Extensions {
		if e.Kind == gardenextensionsv1alpha1.DNSRecordResource && e.Name != nil && *e.Name == key.Name {
			entry = &shootState.Spec.Extensions[i]
		}
	}
	g.Expect(entry).NotTo(BeNil(), "the ShootState has an entry for the DNSRecord: %s", toJSON(shootState.Spec.Extensions))
	g.Expect(entry.State.Raw).To(MatchJSON(migrated.Status.State.Raw))
	g.Expect(record.Destroy(ctx)).To(Succeed())
	g.Expect(record.WaitCleanup(ctx)).To(Succeed())
	g.Expect(localRecords(g, sh)).To(HaveKeyWithValue(name, HaveField("UID", changed.UID)), "deleting a migrated DNSRecord destroys nothing")

	record = component([]string{"192.0.2.11"})
	g.Expect(record.Restore(ctx, shootState)).To(Succeed())
	g.Expect(record.Wait(ctx)).To(Succeed(), func() string { return toJSON(get(g).Status) })
	g.Expect(get(g).Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeRestore))
	g.Expect(localRecords(g, sh)).To(HaveKeyWithValue(name, HaveField("UID", changed.UID)), "restoring recreates nothing")

	// The shoot's deletion.
	g.Expect(record.Destroy(ctx)).To(Succeed())
	g.Expect(record.WaitCleanup(ctx)).To(Succeed())
	g.Expect(localRecords(g, sh)).NotTo(HaveKey(name))
}

// gardenletEntryCredentials is the Secret gardenlet's BackupEntry controller hands to the
// extension's BackupEntry, entry-<name> in garden: the data of the Secret the bucket's
// status names when it generated one (which gardenlet's BackupBucket controller syncs
// into the garden), else of the bucket's own credentials (getGardenCredentials,
// reconcileBackupEntryExtensionSecret).
func gardenletEntryCredentials(ctx context.Context, g Gomega, c client.Client, bucket *gardenextensionsv1alpha1.BackupBucket, entryName string) corev1.SecretReference {
	ref := &bucket.Spec.SecretRef
	if bucket.Status.GeneratedSecretRef != nil {
		ref = bucket.Status.GeneratedSecretRef
	}
	credentials, err := kubernetesutils.GetSecretByReference(ctx, c, ref)
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: v1beta1constants.GardenNamespace, Name: "entry-" + entryName}}
	_, err = controllerutils.GetAndCreateOrMergePatch(ctx, c, secret, func() error {
		secret.Annotations = map[string]string{v1beta1constants.GardenerTimestamp: time.Now().UTC().Format(time.RFC3339Nano)}
		secret.Labels = nil
		secret.Data = credentials.Data
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	return corev1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}
}

// etcdBackupSecret reads the Secret of a shoot's control-plane namespace as gardenlet's
// etcd deployment reads it (botanist.DeployEtcd): the bucket's name from its key.
func etcdBackupSecret(ctx context.Context, g Gomega, c client.Client, namespace string) (*corev1.Secret, string) {
	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: v1beta1constants.BackupSecretName}, secret)).To(Succeed())
	return secret, string(secret.Data[v1beta1constants.DataKeyBackupBucketName])
}

// createdLocalBucket is a local BackupBucket of a namespace's unique name, with the
// seed's kubeconfig in garden as its credentials, as gardenlet's BackupBucket controller
// writes it, and waited for with the helper it waits with.
func createdLocalBucket(ctx context.Context, g Gomega, s *seedCluster, log logr.Logger) *gardenextensionsv1alpha1.BackupBucket {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "compat-backup-"}}
	g.Expect(s.client.Create(ctx, ns)).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: v1beta1constants.GardenNamespace, Name: "bucket-" + ns.Name}, Data: map[string][]byte{"kubeconfig": s.kubeconfig}}
	g.Expect(s.client.Create(ctx, secret)).To(Succeed())
	bucket := &gardenextensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Annotations: map[string]string{
			v1beta1constants.GardenerOperation: v1beta1constants.GardenerOperationReconcile,
			v1beta1constants.GardenerTimestamp: time.Now().UTC().Format(time.RFC3339Nano),
		}},
		Spec: gardenextensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: gardenextensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local-1",
			SecretRef: corev1.SecretReference{Namespace: secret.Namespace, Name: secret.Name},
		},
	}
	g.Expect(s.client.Create(ctx, bucket)).To(Succeed())
	g.Expect(extensions.WaitUntilExtensionObjectReady(ctx, s.client, log, bucket, gardenextensionsv1alpha1.BackupBucketResource,
		waitInterval, waitSevereThreshold, waitTimeout, nil)).To(Succeed(), func() string { return toJSON(bucket.Status) })
	return bucket
}

func TestGardenletCreatesAndDeletesABackupBucketAndMigratesItsEntryWithItsEtcdBackupSecret(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := seedFor(t)
	ctx, cancel := context.WithTimeout(s.alive, 20*time.Minute)
	defer cancel()
	log := testr.New(t)
	garden := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1beta1constants.GardenNamespace}}
	if err := s.client.Create(ctx, garden); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Gardener's credentials of the bucket, in garden: the seed's own kubeconfig for local.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "compat-backup-"}}
	g.Expect(s.client.Create(ctx, ns)).To(Succeed())
	bucketName := ns.Name
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: v1beta1constants.GardenNamespace, Name: "bucket-" + bucketName}, Data: map[string][]byte{"kubeconfig": s.kubeconfig}}
	g.Expect(s.client.Create(ctx, secret)).To(Succeed())
	secretRef := corev1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}

	// The BackupBucket, as gardenlet's BackupBucket controller writes it, and waited for
	// with the helper it waits with.
	bucket := &gardenextensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName, Annotations: map[string]string{
			v1beta1constants.GardenerOperation: v1beta1constants.GardenerOperationReconcile,
			v1beta1constants.GardenerTimestamp: time.Now().UTC().Format(time.RFC3339Nano),
		}},
		Spec: gardenextensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: gardenextensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local-1", SecretRef: secretRef,
		},
	}
	g.Expect(s.client.Create(ctx, bucket)).To(Succeed())
	g.Expect(extensions.WaitUntilExtensionObjectReady(ctx, s.client, log, bucket, gardenextensionsv1alpha1.BackupBucketResource,
		waitInterval, waitSevereThreshold, waitTimeout, nil)).To(Succeed(), func() string { return toJSON(bucket.Status) })
	g.Expect(bucket.Status.GeneratedSecretRef).To(BeNil(), "local generates no Secret: gardenlet hands the entries the bucket's own credentials")

	// A shoot's BackupEntry in it, through gardenlet's component, with the credentials
	// gardenlet's controller takes from the bucket: created, migrated with its state,
	// deleted on the source seed destroying nothing, restored on the destination seed with
	// that seed's bucket beside the "source-" entry that reads its backups, deleted. Each
	// reconcile and restore leaves etcd-backup in the shoot's namespace as gardenlet's etcd
	// reads it.
	entryName := "shoot--compat--" + bucketName + "--" + string(ns.UID)
	shootNamespace, _ := extensionsbackupentry.ExtractShootDetailsFromBackupEntryName(entryName)
	g.Expect(s.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shootNamespace}})).To(Succeed())
	entryCredentials := gardenletEntryCredentials(ctx, g, s.client, bucket, entryName)
	entryValues := &backupentry.Values{Name: entryName, Type: "local", Region: "local-1", SecretRef: entryCredentials, BucketName: bucketName}
	component := func() backupentry.Interface {
		return backupentry.New(log, s.client, clock.RealClock{}, entryValues, waitInterval, waitSevereThreshold, waitTimeout)
	}
	getEntry := func(g Gomega) *gardenextensionsv1alpha1.BackupEntry {
		entry := &gardenextensionsv1alpha1.BackupEntry{}
		g.Expect(s.client.Get(ctx, client.ObjectKey{Name: entryName}, entry)).To(Succeed())
		return entry
	}
	entryObject := func(g Gomega) types.UID {
		list := &corev1.ConfigMapList{}
		g.Expect(s.client.List(ctx, list, client.InNamespace("bucket-"+bucketName), client.HasLabels{"app.kubernetes.io/managed-by"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0].Data).To(HaveKeyWithValue("prefix", entryName))
		return list.Items[0].UID
	}
	expectEtcdBackup := func(g Gomega, bucketName string) {
		etcdBackup, container := etcdBackupSecret(ctx, g, s.client, shootNamespace)
		g.Expect(container).To(Equal(bucketName))
		g.Expect(etcdBackup.Data).To(Equal(map[string][]byte{"kubeconfig": s.kubeconfig, v1beta1constants.DataKeyBackupBucketName: []byte(bucketName)}))
	}
	entry := component()
	g.Expect(entry.Deploy(ctx)).To(Succeed())
	g.Expect(entry.Wait(ctx)).To(Succeed(), func() string { return toJSON(getEntry(g).Status) })
	made := entryObject(g)
	expectEtcdBackup(g, bucketName)
	// What etcd's backup would be: an object in the namespace of the entry's prefix.
	marker := &corev1.ConfigMapList{}
	g.Expect(s.client.List(ctx, marker, client.InNamespace("bucket-"+bucketName), client.HasLabels{"app.kubernetes.io/managed-by"})).To(Succeed())
	backupsNamespace := marker.Items[0].Data["backups"]
	backup := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: backupsNamespace, Name: "full-snapshot-1"}, Data: map[string]string{"etcd": "snapshot"}}
	g.Expect(s.client.Create(ctx, backup)).To(Succeed())
	expectBackupKept := func(g Gomega, why string) {
		kept := &corev1.ConfigMap{}
		g.Expect(s.client.Get(ctx, client.ObjectKeyFromObject(backup), kept)).To(Succeed(), why)
		g.Expect(kept.UID).To(Equal(backup.UID), why)
		namespace := &corev1.Namespace{}
		g.Expect(s.client.Get(ctx, client.ObjectKey{Name: backupsNamespace}, namespace)).To(Succeed(), why)
		g.Expect(namespace.DeletionTimestamp).To(BeNil(), why)
	}

	g.Expect(entry.Migrate(ctx)).To(Succeed())
	g.Expect(entry.WaitMigrate(ctx)).To(Succeed(), func() string { return toJSON(getEntry(g).Status) })
	migrated := getEntry(g)
	decodeInfrastructureState(g, migrated.Status.State)
	g.Expect(entry.Destroy(ctx)).To(Succeed())
	g.Expect(entry.WaitCleanup(ctx)).To(Succeed())
	g.Expect(entryObject(g)).To(Equal(made), "deleting a migrated BackupEntry destroys nothing")

	// The destination's ShootState entry, as gardenlet's migrate flow writes one for it,
	// and its shoot namespace, which holds no etcd-backup yet.
	etcdBackup, _ := etcdBackupSecret(ctx, g, s.client, shootNamespace)
	g.Expect(s.client.Delete(ctx, etcdBackup)).To(Succeed())
	shootState := &gardencorev1beta1.ShootState{Spec: gardencorev1beta1.ShootStateSpec{Extensions: []gardencorev1beta1.ExtensionResourceState{{
		Kind: gardenextensionsv1alpha1.BackupEntryResource, Name: ptr(entryName), State: migrated.Status.State,
	}}}}

	// The destination seed has a bucket of its own. gardenlet deploys the source entry, of
	// the source seed's bucket, then restores the shoot's entry with the destination's
	// bucket (DeploySourceBackupEntry, DeployBackupEntry), copies the backups, and deletes
	// the source entry (DestroySourceBackupEntry).
	destination := createdLocalBucket(ctx, g, s, log)
	sourceName := v1beta1constants.BackupSourcePrefix + "-" + entryName
	source := backupentry.New(log, s.client, clock.RealClock{}, &backupentry.Values{Name: sourceName, Type: "local", Region: "local-1",
		SecretRef: gardenletEntryCredentials(ctx, g, s.client, bucket, sourceName), BucketName: bucketName}, waitInterval, waitSevereThreshold, waitTimeout)
	g.Expect(source.Deploy(ctx)).To(Succeed())
	g.Expect(source.Wait(ctx)).To(Succeed())
	entryValues.BucketName = destination.Name
	entryValues.SecretRef = gardenletEntryCredentials(ctx, g, s.client, destination, entryName)
	entry = component()
	g.Expect(entry.Restore(ctx, shootState)).To(Succeed())
	g.Expect(entry.Wait(ctx)).To(Succeed(), func() string { return toJSON(getEntry(g).Status) })
	g.Expect(getEntry(g).Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeRestore))
	expectEtcdBackup(g, destination.Name)
	expectBackupKept(g, "the restore with the destination's bucket kept the backups")
	g.Expect(s.client.List(ctx, marker, client.InNamespace("bucket-"+bucketName), client.HasLabels{"app.kubernetes.io/managed-by"})).To(Succeed())
	reads := map[types.UID]string{}
	for _, m := range marker.Items {
		reads[m.UID] = m.Data["backups"]
	}
	g.Expect(reads).To(HaveLen(2))
	g.Expect(reads).To(HaveKeyWithValue(made, backupsNamespace), "restoring recreates nothing")
	for uid, namespace := range reads {
		g.Expect(namespace).To(Equal(backupsNamespace), "the source entry (%s) reads the namespace that holds the backups", uid)
	}
	sourceEtcdBackup := &corev1.Secret{}
	g.Expect(s.client.Get(ctx, client.ObjectKey{Namespace: shootNamespace, Name: v1beta1constants.BackupSourcePrefix + "-" + v1beta1constants.BackupSecretName}, sourceEtcdBackup)).To(Succeed())
	g.Expect(string(sourceEtcdBackup.Data[v1beta1constants.DataKeyBackupBucketName])).To(Equal(bucketName), "etcd copies from the source seed's bucket")
	g.Expect(source.Destroy(ctx)).To(Succeed())
	g.Expect(source.WaitCleanup(ctx)).To(Succeed())
	g.Expect(entryObject(g)).To(Equal(made), "the source entry's deletion left the shoot's entry")
	expectBackupKept(g, "the source entry's deletion left the backups")

	g.Expect(entry.Destroy(ctx)).To(Succeed())
	g.Expect(entry.WaitCleanup(ctx)).To(Succeed())
	list := &corev1.ConfigMapList{}
	g.Expect(s.client.List(ctx, list, client.InNamespace("bucket-"+bucketName), client.HasLabels{"app.kubernetes.io/managed-by"})).To(Succeed())
	g.Expect(list.Items).To(BeEmpty(), "the entry's deletion destroyed its objects")
	err := s.client.Get(ctx, client.ObjectKey{Namespace: shootNamespace, Name: v1beta1constants.BackupSecretName}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the entry's deletion removed etcd-backup: %v", err)

	namespace := &corev1.Namespace{}
	err = s.client.Get(ctx, client.ObjectKey{Name: backupsNamespace}, namespace)
	g.Expect(apierrors.IsNotFound(err) || namespace.DeletionTimestamp != nil).To(BeTrue(), "the entry's deletion deleted the namespace of its backups: %v", err)

	// The buckets' deletion, with the helpers gardenlet deletes them with.
	for _, bucket := range []*gardenextensionsv1alpha1.BackupBucket{bucket, destination} {
		g.Expect(extensions.DeleteExtensionObject(ctx, s.client, bucket)).To(Succeed())
		g.Expect(extensions.WaitUntilExtensionObjectDeleted(ctx, s.client, log, bucket, gardenextensionsv1alpha1.BackupBucketResource, waitInterval, waitTimeout)).To(Succeed())
	}
}

func TestGardenletOpensAndRemovesABastion(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "bastion", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := sh.ctx
	b := bastion.New(testr.New(t), sh.seed.client, fakesecretsmanager.New(sh.seed.client, sh.namespace), &bastion.Values{
		Name: "cli-compat", Namespace: sh.namespace, Provider: "local", IngressCIDRs: []string{"198.51.100.0/24"},
	})
	b.WaitInterval = waitInterval
	// No node runs the bastion's pod here: the SSH dial, the one step gardenlet takes
	// beyond the Bastion object, is recorded instead of made.
	var dialed string
	b.SSHDial = func(_ context.Context, addr string, _ ...sshutils.Option) (*sshutils.Connection, error) {
		dialed = addr
		return nil, nil
	}
	g.Expect(b.Deploy(ctx)).To(Succeed())
	g.Expect(b.Wait(ctx)).To(Succeed())
	object := &gardenextensionsv1alpha1.Bastion{}
	g.Expect(sh.seed.client.Get(ctx, client.ObjectKey{Namespace: sh.namespace, Name: "cli-compat"}, object)).To(Succeed())
	g.Expect(object.Status.Ingress).NotTo(BeNil())
	g.Expect(dialed).To(Equal(net.JoinHostPort(object.Status.Ingress.Hostname, "22")), "gardenlet connects to the address the status names")

	g.Expect(b.Destroy(ctx)).To(Succeed())
	g.Expect(b.WaitCleanup(ctx)).To(Succeed())
}
