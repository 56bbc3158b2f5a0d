package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// servingKinds serves the kinds besides the Infrastructure; the runs of cluster-scoped
// ones are kept in runsNamespace.
func servingKinds(runsNamespace string) actuatorOption {
	return func(s *controllerSetup) {
		s.Kinds = true
		s.Namespace = runsNamespace
	}
}

// kindObject is an object of a kind served from templates, as the tests read it.
type kindObject interface {
	client.Object
	GetExtensionStatus() *extensionsv1alpha1.DefaultStatus
}

// waitForKind waits until obj's last operation of the given type reached state, and reads
// obj anew.
func waitForKind(t *testing.T, obj kindObject, opType extensionsv1alpha1.LastOperationType, state extensionsv1alpha1.LastOperationState) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		status := obj.GetExtensionStatus()
		g.Expect(status.LastOperation).NotTo(BeNil())
		g.Expect(status.LastOperation.Type).To(Equal(opType), "last operation: %+v", status.LastOperation)
		g.Expect(status.LastOperation.State).To(Equal(state), "last operation: %+v, last error: %+v", status.LastOperation, status.LastError)
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
}

func waitKindGone(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}).WithTimeout(3 * time.Minute).Should(BeTrue())
}

// annotateKind asks for an operation as Gardener does.
func annotateKind(g Gomega, obj client.Object, operation string) {
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[extension.AnnotationOperation] = operation
		obj.SetAnnotations(annotations)
		g.Expect(env.Client.Update(context.Background(), obj)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// kindRunObjectsLeft are the run objects of the object of a kind that exist, in the
// namespace of its runs.
func kindRunObjectsLeft(g Gomega, namespace, name string, purpose run.Purpose) []string {
	objects := state.RunObjects{ID: run.ID{Namespace: namespace, Name: name, Purpose: purpose}}
	var left []string
	for _, n := range []string{objects.ConfigName(), objects.StateName()} {
		if err := env.Client.Get(context.Background(), keyOf(namespace, n), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			g.Expect(err).NotTo(HaveOccurred())
			left = append(left, n)
		}
	}
	for _, n := range []string{objects.VarsName(), objects.ID.CredentialsName(), objects.ID.OutputsName()} {
		if err := env.Client.Get(context.Background(), keyOf(namespace, n), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			g.Expect(err).NotTo(HaveOccurred())
			left = append(left, n)
		}
	}
	return left
}

// kindStateSerial is the serial of the live state of the object of a kind.
func kindStateSerial(g Gomega, namespace, name string, purpose run.Purpose) int64 {
	objects, err := state.RunObjects{ID: run.ID{Namespace: namespace, Name: name, Purpose: purpose}}.Found(context.Background(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	stored, err := objects.Store(env.Client).Inspect(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	return stored.Serial
}

func kubeconfigSecret(t *testing.T, namespace, name string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{"kubeconfig": adminKubeconfig(t)}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
}

// newDNSRecord is a DNSRecord of the secret "dns" in ns; providerConfig "" is none.
func newDNSRecord(ns, name, providerType, providerConfig, dnsName string, recordType extensionsv1alpha1.DNSRecordType, values ...string) *extensionsv1alpha1.DNSRecord {
	record := &extensionsv1alpha1.DNSRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			SecretRef:   corev1.SecretReference{Name: "dns"},
			Name:        dnsName,
			RecordType:  recordType,
			Values:      values,
		},
	}
	if providerConfig != "" {
		record.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(providerConfig)}
	}
	return record
}

// entryMarkers are the ConfigMaps that stand for the BackupEntries of a local bucket.
func entryMarkers(g Gomega, bucketNamespace string) []corev1.ConfigMap {
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(bucketNamespace), client.HasLabels{"app.kubernetes.io/managed-by"})).To(Succeed())
	return list.Items
}

// newBastion is a local Bastion letting SSH in from cidr.
func newBastion(ns, name, cidr string) *extensionsv1alpha1.Bastion {
	return &extensionsv1alpha1.Bastion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extensionsv1alpha1.BastionSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"},
			UserData:    []byte("#!/bin/sh\n"),
			Ingress:     []extensionsv1alpha1.BastionIngressPolicy{{IPBlock: networkingv1.IPBlock{CIDR: cidr}}},
		},
	}
}

// createdBastionNamespace waits until bastion is created and returns the namespace its
// Service is in, from the Service's name in the status: bastion.<namespace>.svc.
func createdBastionNamespace(t *testing.T, bastion *extensionsv1alpha1.Bastion) string {
	t.Helper()
	waitForKind(t, bastion, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g := NewWithT(t)
	g.Expect(bastion.Status.Ingress).NotTo(BeNil())
	g.Expect(bastion.Status.Ingress.Hostname).To(HaveSuffix(".svc"), "the status names the bastion's address")
	return strings.TrimSuffix(strings.TrimPrefix(bastion.Status.Ingress.Hostname, "bastion."), ".svc")
}

func dnsRecordsOf(g Gomega, namespace string) []corev1.ConfigMap {
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(namespace), client.HasLabels{"dns.terraseed.io/zone"})).To(Succeed())
	return list.Items
}

// A DNSRecord is created, changed and deleted through the same operations as an
// Infrastructure, its runs named <name>.dnsrecord.tf-*; the zone found is kept in its
// status, and the record (a ConfigMap the local provider makes) follows each step.
func TestDNSRecordCreateChangeAndDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, "dns")
	c := startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	g.Expect(c.served).To(ConsistOf("dnsrecord", "bastion", "selfhostedshootexposure"), "without a namespace for their runs, the cluster-scoped kinds are not served")

	record := newDNSRecord(ns, "shoot-api", "local", `{"namespace":"`+ns+`"}`, "api.shoot.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.10")
	recordApplies := func() float64 {
		return metric(g, "terraseed_terraform_runs_total", map[string]string{"kind": "dnsrecord", "command": "apply", "result": "succeeded"}).GetCounter().GetValue()
	}
	appliesBefore := recordApplies()
	g.Expect(env.Client.Create(ctx, record)).To(Succeed())
	waitForKind(t, record, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(record.Status.Zone).To(Equal(ptr("shoot.example.com")), "the zone found is kept")
	g.Expect(record.Finalizers).To(ContainElement("extensions.gardener.cloud/dnsrecord"))
	g.Expect(record.Status.ObservedGeneration).To(Equal(record.Generation))
	records := dnsRecordsOf(g, ns)
	g.Expect(records).To(HaveLen(1))
	g.Expect(records[0].Data).To(HaveKeyWithValue("values", `["192.0.2.10"]`))
	g.Expect(kindRunObjectsLeft(g, ns, record.Name, "dnsrecord")).To(ConsistOf("shoot-api.dnsrecord.tf-config", "shoot-api.dnsrecord.tf-state",
		"shoot-api.dnsrecord.tf-vars", "shoot-api.dnsrecord.credentials"), "the runs keep their objects beside the DNSRecord")

	record.Spec.Values = []string{"192.0.2.11"}
	record.Spec.TTL = ptr(int64(300))
	g.Expect(env.Client.Update(ctx, record)).To(Succeed())
	g.Eventually(func(g Gomega) {
		records := dnsRecordsOf(g, ns)
		g.Expect(records).To(HaveLen(1))
		g.Expect(records[0].Data).To(And(HaveKeyWithValue("values", `["192.0.2.11"]`), HaveKeyWithValue("ttl", "300")))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	waitForKind(t, record, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(recordApplies()-appliesBefore).To(BeNumerically("==", 2), "the create and the change, counted under the DNSRecord's kind")

	// The state of each apply is kept, and `terraseed state` rolls back to one.
	ref := kinds.StateRef{Kind: "dnsrecord", Key: client.ObjectKeyFromObject(record)}
	entries, err := kinds.StateHistory(ctx, env.Client, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2), "the create's state and the change's")
	back, err := kinds.RollbackState(ctx, env.Client, ref, entries[1].Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(entries[0].Serial + 1))
	g.Expect(kindStateSerial(g, ns, record.Name, "dnsrecord")).To(Equal(back))

	g.Expect(env.Client.Delete(ctx, record)).To(Succeed())
	waitKindGone(t, record)
	g.Expect(dnsRecordsOf(g, ns)).To(BeEmpty(), "the deletion destroyed the record")
	g.Expect(kindRunObjectsLeft(g, ns, record.Name, "dnsrecord")).To(BeEmpty())
}

// A DNSRecord migrated away keeps its state in its status and releases its run objects;
// restored, it takes the state back and recreates nothing.
func TestDNSRecordMigrateThenRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, "dns")
	startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	record := newDNSRecord(ns, "shoot-api", "local", `{"namespace":"`+ns+`"}`, "api.shoot.example.com", extensionsv1alpha1.DNSRecordTypeCNAME, "lb.example.com")
	g.Expect(env.Client.Create(ctx, record)).To(Succeed())
	waitForKind(t, record, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	created := dnsRecordsOf(g, ns)[0].UID

	annotateKind(g, record, extension.OperationMigrate)
	waitForKind(t, record, extensionsv1alpha1.LastOperationTypeMigrate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(record.Status.State).NotTo(BeNil(), "the state travels in the status")
	var kept struct{ Kind string }
	g.Expect(json.Unmarshal(record.Status.State.Raw, &kept)).To(Succeed())
	g.Expect(kept.Kind).To(Equal("InfrastructureState"))
	g.Eventually(func(g Gomega) []string { return kindRunObjectsLeft(g, ns, record.Name, "dnsrecord") }).
		WithTimeout(time.Minute).Should(BeEmpty(), "a migration releases the run objects")

	annotateKind(g, record, extension.OperationRestore)
	waitForKind(t, record, extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateSucceeded)
	records := dnsRecordsOf(g, ns)
	g.Expect(records).To(HaveLen(1))
	g.Expect(records[0].UID).To(Equal(created), "the restore recreated nothing")
	g.Expect(kindRunObjectsLeft(g, ns, record.Name, "dnsrecord")).To(HaveLen(4), "the restore wrote the run objects back")
}

// A BackupBucket and a BackupEntry are cluster-scoped: their runs are kept in the
// controller's namespace. A local bucket generates no Secret: its entries get its own
// credentials. Each is changed in place; the entry is migrated and restored; the
// deletions remove the entry with the backups under its prefix, and the bucket.
func TestBackupBucketAndEntryLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllerNS := env.Namespace(t)
	garden := env.Namespace(t)
	kubeconfigSecret(t, garden, "backup")
	c := startControllerWith(t, controllerNS, workDir(t), env.Config, 2, servingKinds(controllerNS))
	g.Expect(c.served).To(ConsistOf("backupbucket", "backupentry", "dnsrecord", "bastion", "selfhostedshootexposure"))

	// Unique per run: envtest keeps a deleted namespace, the bucket, Terminating.
	bucketName := controllerNS
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName, Annotations: map[string]string{kinds.AnnotationGeneratedSecretNamespace: garden}},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
		},
	}
	g.Expect(env.Client.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucket) })
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(bucket.Status.GeneratedSecretRef).To(BeNil())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(garden, "generated-bucket-"+bucketName), &corev1.Secret{}))).To(BeTrue(), "no generated Secret")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "bucket-" + bucketName}, &corev1.Namespace{})).To(Succeed())
	g.Expect(kindRunObjectsLeft(g, controllerNS, bucket.Name, "backupbucket")).To(HaveLen(4), "the bucket's runs are kept in the controller's namespace")

	// A changed region is the bucket's label, changed in place.
	bucket.Spec.Region = "local-2"
	g.Expect(env.Client.Update(ctx, bucket)).To(Succeed())
	g.Eventually(func(g Gomega) map[string]string {
		ns := &corev1.Namespace{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "bucket-" + bucketName}, ns)).To(Succeed())
		return ns.Labels
	}).WithTimeout(3 * time.Minute).Should(HaveKeyWithValue("backup.terraseed.io/region", "local-2"))
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)

	entry := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--" + controllerNS + "--local--1b2c3d4e"},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local", BucketName: bucketName,
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
		},
	}
	g.Expect(env.Client.Create(ctx, entry)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), entry) })
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	markers := entryMarkers(g, "bucket-"+bucketName)
	g.Expect(markers).To(HaveLen(1))
	g.Expect(markers[0].Data).To(HaveKeyWithValue("prefix", entry.Name))
	backupsNS := markers[0].Data["backups"]
	backups := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: backupsNS}, backups)).To(Succeed(), "the entry's prefix is a namespace of its own")
	g.Expect(backups.Labels).To(HaveKeyWithValue("backup.terraseed.io/bucket", "bucket-"+bucketName))
	// What etcd's backups would be: objects under the entry's prefix, written by another.
	backup := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: backupsNS, Name: "full-snapshot-1"}, Data: map[string]string{"etcd": "snapshot"}}
	g.Expect(env.Client.Create(ctx, backup)).To(Succeed())

	// A changed region is the prefix's label, changed in place: the backups stay.
	entry.Spec.Region = "local-2"
	g.Expect(env.Client.Update(ctx, entry)).To(Succeed())
	g.Eventually(func(g Gomega) map[string]string {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: backupsNS}, backups)).To(Succeed())
		return backups.Labels
	}).WithTimeout(3 * time.Minute).Should(HaveKeyWithValue("backup.terraseed.io/region", "local-2"))
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	created := backups.UID

	// Migrated, the entry releases its runs' objects; restored, it recreates nothing.
	annotateKind(g, entry, extension.OperationMigrate)
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeMigrate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(entry.Status.State).NotTo(BeNil(), "the state travels in the status")
	g.Eventually(func(g Gomega) []string { return kindRunObjectsLeft(g, controllerNS, entry.Name, "backupentry") }).
		WithTimeout(time.Minute).Should(BeEmpty(), "a migration releases the run objects")
	annotateKind(g, entry, extension.OperationRestore)
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: backupsNS}, backups)).To(Succeed())
	g.Expect(backups.UID).To(Equal(created), "the restore recreated nothing")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(backup), backup)).To(Succeed())
	g.Expect(kindRunObjectsLeft(g, controllerNS, entry.Name, "backupentry")).To(HaveLen(4), "the restore wrote the run objects back")
	entries, err := kinds.StateHistory(ctx, env.Client, kinds.StateRef{Kind: "backupentry", Key: client.ObjectKeyFromObject(entry), RunsNamespace: controllerNS})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).NotTo(BeEmpty(), "the history of a cluster-scoped kind is read from the controller's namespace")
	g.Expect(entries[0].Serial).To(Equal(kindStateSerial(g, controllerNS, entry.Name, "backupentry")))

	// The entry of a control plane migration's source reads the shoot's backups and owns
	// none: its deletion leaves them.
	source := &extensionsv1alpha1.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: "source-" + entry.Name}, Spec: entry.Spec}
	g.Expect(env.Client.Create(ctx, source)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), source) })
	waitForKind(t, source, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(entryMarkers(g, "bucket-"+bucketName)).To(HaveLen(2))
	g.Expect(env.Client.Delete(ctx, source)).To(Succeed())
	waitKindGone(t, source)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: backupsNS}, backups)).To(Succeed())
	g.Expect(backups.DeletionTimestamp).To(BeNil(), "the source entry's deletion left the shoot's backups")
	g.Expect(entryMarkers(g, "bucket-"+bucketName)).To(HaveLen(1))

	g.Expect(env.Client.Delete(ctx, entry)).To(Succeed())
	waitKindGone(t, entry)
	g.Expect(entryMarkers(g, "bucket-"+bucketName)).To(BeEmpty(), "the entry's deletion destroyed its objects")
	// envtest runs no namespace controller: the deleted namespace stays Terminating here,
	// and a cluster then removes the backups in it (test/e2e sees them go).
	err = env.Client.Get(ctx, client.ObjectKey{Name: backupsNS}, backups)
	g.Expect(apierrors.IsNotFound(err) || backups.DeletionTimestamp != nil).To(BeTrue(), "the entry's deletion deleted the namespace of its prefix")
	g.Expect(kindRunObjectsLeft(g, controllerNS, entry.Name, "backupentry")).To(BeEmpty())

	g.Expect(env.Client.Delete(ctx, bucket)).To(Succeed())
	waitKindGone(t, bucket)
	ns := &corev1.Namespace{}
	err = env.Client.Get(ctx, client.ObjectKey{Name: "bucket-" + bucketName}, ns)
	g.Expect(apierrors.IsNotFound(err) || ns.DeletionTimestamp != nil).To(BeTrue(), "the bucket's deletion destroyed its namespace")
	g.Expect(kindRunObjectsLeft(g, controllerNS, bucket.Name, "backupbucket")).To(BeEmpty())
}

// A Bastion uses the cloudprovider Secret of its namespace; its status names its
// address; a force deletion leaves what it made and removes what its runs kept.
func TestBastionCreateThenForceDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, extensionsv1alpha1.BastionSecretName)
	s := &shoot{namespace: ns}
	forceDeletionConfirmed(t, s)
	startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	bastion := newBastion(ns, "cli-abcd1234", "198.51.100.0/24")
	bastion.Spec.UserData = []byte("#!/bin/sh\necho ssh-ed25519 AAAA >> /home/gardener/.ssh/authorized_keys\n")
	g.Expect(env.Client.Create(ctx, bastion)).To(Succeed())
	bastionNS := createdBastionNamespace(t, bastion)
	sshFrom := func(g Gomega) []networkingv1.NetworkPolicyPeer {
		ssh := &networkingv1.NetworkPolicy{}
		g.Expect(env.Client.Get(ctx, keyOf(bastionNS, "ssh"), ssh)).To(Succeed())
		g.Expect(ssh.Spec.Ingress).To(HaveLen(1))
		return ssh.Spec.Ingress[0].From
	}
	g.Expect(sshFrom(g)).To(Equal([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "198.51.100.0/24"}}}))

	// The operator's address changed: SSH is let in from the new block only.
	bastion.Spec.Ingress = []extensionsv1alpha1.BastionIngressPolicy{{IPBlock: networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}
	g.Expect(env.Client.Update(ctx, bastion)).To(Succeed())
	g.Eventually(sshFrom).WithTimeout(3 * time.Minute).Should(Equal([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24"}}}))
	waitForKind(t, bastion, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)

	g.Expect(env.Client.Delete(ctx, bastion)).To(Succeed())
	waitKindGone(t, bastion)
	g.Expect(kindRunObjectsLeft(g, ns, bastion.Name, "bastion")).To(BeEmpty())
	g.Expect(env.Client.Get(ctx, keyOf(bastionNS, "ssh"), &networkingv1.NetworkPolicy{})).To(Succeed(), "a force deletion destroys nothing")
}

// A Bastion's deletion reverts everything it made: the machine, its Service and the
// policies that let SSH in.
func TestBastionCreateThenDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, extensionsv1alpha1.BastionSecretName)
	startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	bastion := newBastion(ns, "cli-deleted", "198.51.100.7/32")
	g.Expect(env.Client.Create(ctx, bastion)).To(Succeed())
	bastionNS := createdBastionNamespace(t, bastion)
	made := []client.Object{&corev1.Pod{}, &corev1.Secret{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}, &networkingv1.NetworkPolicy{}}
	for i, name := range []string{"bastion", "user-data", "bastion", "ssh", "deny-all"} {
		g.Expect(env.Client.Get(ctx, keyOf(bastionNS, name), made[i])).To(Succeed(), "%s was made", name)
	}

	g.Expect(env.Client.Delete(ctx, bastion)).To(Succeed())
	waitKindGone(t, bastion)
	for _, obj := range made {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))).To(BeTrue(), "%s was destroyed", obj.GetName())
	}
	g.Expect(kindRunObjectsLeft(g, ns, bastion.Name, "bastion")).To(BeEmpty())
}

// A kind a provider ships no directory for is not served: a DNSRecord of the slow
// provider, which has none, is left alone, while the same controller serves a DNSRecord
// of the local provider beside it.
func TestAKindWithoutTemplatesIsNotServed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, "dns")
	startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	record := newDNSRecord(ns, "unserved", "slow", "", "api.unserved.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.10")
	g.Expect(env.Client.Create(ctx, record)).To(Succeed())
	served := newDNSRecord(ns, "served", "local", `{"namespace":"`+ns+`"}`, "api.served.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.10")
	g.Expect(env.Client.Create(ctx, served)).To(Succeed())
	waitForKind(t, served, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(record), record)).To(Succeed())
		g.Expect(record.Status.LastOperation).To(BeNil())
		g.Expect(record.Finalizers).To(BeEmpty())
	}).WithTimeout(5 * time.Second).Should(Succeed())
	g.Expect(kindRunObjectsLeft(g, ns, record.Name, "dnsrecord")).To(BeEmpty())
}

// The DNSRecord of a shoot whose force deletion is confirmed is forgotten, not destroyed:
// the record stays, what its runs kept goes.
func TestDNSRecordForceDeletionLeavesTheRecord(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, "dns")
	forceDeletionConfirmed(t, &shoot{namespace: ns})
	startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	record := newDNSRecord(ns, "shoot-api", "local", `{"namespace":"`+ns+`"}`, "api.forced.example.com", extensionsv1alpha1.DNSRecordTypeTXT, "verification=1")
	g.Expect(env.Client.Create(ctx, record)).To(Succeed())
	waitForKind(t, record, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	g.Expect(env.Client.Delete(ctx, record)).To(Succeed())
	waitKindGone(t, record)
	g.Expect(dnsRecordsOf(g, ns)).To(HaveLen(1), "a force deletion destroys nothing")
	g.Expect(kindRunObjectsLeft(g, ns, record.Name, "dnsrecord")).To(BeEmpty())
}

// A deletion while an object's apply is under way stops the apply, destroys what it made
// from its final state, and leaves nothing: no run object and none of its ConfigMaps. The
// runs of the cluster-scoped kinds are kept in the controller's namespace.
func TestADeletionDuringItsApplyLeavesNothing(t *testing.T) {
	slow := func(ns string) extensionsv1alpha1.DefaultSpec {
		return extensionsv1alpha1.DefaultSpec{Type: "slowlocal", ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"namespace":"` + ns + `","steps":3,"seconds":8}`)}}
	}
	for _, tc := range []struct {
		kind          run.Purpose
		clusterScoped bool
		secret        string // in the namespace of the object, or of the controller for a cluster-scoped one
		prefix        string // of the ConfigMaps the slow provider makes
		objects       func(ns string) client.Object
	}{
		{"dnsrecord", false, "dns", "record", func(ns string) client.Object {
			record := newDNSRecord(ns, "slow", "slowlocal", "", "api.slow.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.10")
			record.Spec.DefaultSpec = slow(ns)
			return record
		}},
		{"bastion", false, extensionsv1alpha1.BastionSecretName, "bastion", func(ns string) client.Object {
			bastion := newBastion(ns, "slow", "198.51.100.0/24")
			bastion.Spec.DefaultSpec = slow(ns)
			return bastion
		}},
		{"backupbucket", true, "backup", "bucket", func(ns string) client.Object {
			return &extensionsv1alpha1.BackupBucket{
				ObjectMeta: metav1.ObjectMeta{Name: ns},
				Spec:       extensionsv1alpha1.BackupBucketSpec{DefaultSpec: slow(ns), Region: "local-1", SecretRef: corev1.SecretReference{Name: "backup", Namespace: ns}},
			}
		}},
		{"backupentry", true, "backup", "entry", func(ns string) client.Object {
			return &extensionsv1alpha1.BackupEntry{
				ObjectMeta: metav1.ObjectMeta{Name: "shoot--" + ns + "--slow"},
				Spec: extensionsv1alpha1.BackupEntrySpec{DefaultSpec: slow(ns), Region: "local-1", BucketName: ns,
					SecretRef: corev1.SecretReference{Name: "backup", Namespace: ns}},
			}
		}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			// Every controller that serves a cluster-scoped kind sees all of its objects:
			// those kinds are tested one at a time, and the namespaced ones side by side
			// after them, by controllers that serve no cluster-scoped kind.
			if !tc.clusterScoped {
				t.Parallel()
			}
			g := NewWithT(t)
			ctx := context.Background()
			ns := env.Namespace(t)
			runsNamespace := ""
			if tc.clusterScoped {
				runsNamespace = ns
			}
			kubeconfigSecret(t, ns, tc.secret)
			startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(runsNamespace))
			obj := tc.objects(ns)
			g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
			g.Eventually(func() error {
				return env.Client.Get(ctx, keyOf(ns, tc.prefix+"-step-0"), &corev1.ConfigMap{})
			}).WithTimeout(2*time.Minute).Should(Succeed(), "the apply is under way")

			g.Expect(env.Client.Delete(ctx, obj)).To(Succeed())
			waitKindGone(t, obj)
			for i := range 3 {
				step := fmt.Sprintf("%s-step-%d", tc.prefix, i)
				g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(ns, step), &corev1.ConfigMap{}))).To(BeTrue(), "%s was destroyed or never made", step)
			}
			g.Consistently(func(g Gomega) []string { return kindRunObjectsLeft(g, ns, obj.GetName(), tc.kind) }).
				WithTimeout(20*time.Second).WithPolling(250*time.Millisecond).Should(BeEmpty(), "nothing writes for the %s once it is gone", tc.kind)
		})
	}
}
