package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// kindObject is an extension object of a kind served from templates.
type kindObject interface {
	client.Object
	GetExtensionStatus() *extensionsv1alpha1.DefaultStatus
}

func waitKindSucceeded(t *testing.T, obj kindObject, opType extensionsv1alpha1.LastOperationType) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(kube.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		status := obj.GetExtensionStatus()
		g.Expect(status.LastOperation).NotTo(BeNil())
		g.Expect(status.LastOperation.Type).To(Equal(opType), "last operation: %+v, last error: %+v", status.LastOperation, status.LastError)
		g.Expect(status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "last operation: %+v, last error: %+v", status.LastOperation, status.LastError)
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
}

func deleteKindAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	g := NewWithT(t)
	if err := kube.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting %s: %v", obj.GetName(), err)
	}
	g.Eventually(func() bool {
		return apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(BeTrue(), "%s is deleted", obj.GetName())
}

// The controller the chart installed, with the chart's RBAC and admission policies, serves
// a DNSRecord through run pods in its namespace, and a BackupBucket and a BackupEntry,
// which have none, through run pods in the release's; the entry, of the shoot whose
// namespace is ns, writes etcd-backup there with the chart's RBAC; the entry's deletion
// removes it and the backups under its prefix.
func TestKindsThroughRunPods(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	pods := watchPods(t, ns)
	releasePods := watchPods(t, releaseNamespace)
	kubeconfig := adminKubeconfig(t)
	g.Expect(kube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dns"}, Data: map[string][]byte{"kubeconfig": kubeconfig}})).To(Succeed())

	record := &extensionsv1alpha1.DNSRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
		Spec: extensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"namespace":"` + ns + `"}`)}},
			SecretRef:   corev1.SecretReference{Name: "dns"},
			Name:        "api." + ns + ".e2e.example.com",
			RecordType:  extensionsv1alpha1.DNSRecordTypeA,
			Values:      []string{"192.0.2.10"},
		},
	}
	g.Expect(kube.Create(ctx, record)).To(Succeed())
	t.Cleanup(func() { deleteKindAndWait(t, record) })
	waitKindSucceeded(t, record, extensionsv1alpha1.LastOperationTypeCreate)
	g.Expect(record.Status.Zone).To(HaveValue(Equal(ns + ".e2e.example.com")))
	records := &corev1.ConfigMapList{}
	g.Expect(kube.List(ctx, records, client.InNamespace(ns), client.HasLabels{"dns.terraseed.io/zone"})).To(Succeed())
	g.Expect(records.Items).To(HaveLen(1))
	g.Expect(records.Items[0].Data).To(HaveKeyWithValue("values", `["192.0.2.10"]`))
	var recordPods []string
	for _, p := range pods.seen() {
		if p.Name == "api.dnsrecord.tf-run" && p.Spec.NodeName != "" {
			recordPods = append(recordPods, p.Name)
			g.Expect(p.Spec.ServiceAccountName).To(Equal(terraformerAccount))
		}
	}
	g.Expect(recordPods).NotTo(BeEmpty(), "the DNSRecord's run pod ran in its namespace")
	deleteKindAndWait(t, record)
	g.Expect(kube.List(ctx, records, client.InNamespace(ns), client.HasLabels{"dns.terraseed.io/zone"})).To(Succeed())
	g.Expect(records.Items).To(BeEmpty(), "the deletion destroyed the record")

	// The bucket's credentials, in garden as Gardener keeps them.
	if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	credentials := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "backup-" + ns}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	g.Expect(kube.Create(ctx, credentials)).To(Succeed())
	t.Cleanup(func() { _ = kube.Delete(context.Background(), credentials) })
	secretRef := corev1.SecretReference{Namespace: "garden", Name: credentials.Name}
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local-1", SecretRef: secretRef},
	}
	g.Expect(kube.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { deleteKindAndWait(t, bucket) })
	waitKindSucceeded(t, bucket, extensionsv1alpha1.LastOperationTypeCreate)
	g.Expect(bucket.Status.GeneratedSecretRef).To(BeNil(), "local generates no Secret: its entries get the bucket's credentials")

	entry := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "--1b2c3d4e"},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local-1", BucketName: bucket.Name, SecretRef: secretRef,
		},
	}
	g.Expect(kube.Create(ctx, entry)).To(Succeed())
	t.Cleanup(func() { deleteKindAndWait(t, entry) })
	waitKindSucceeded(t, entry, extensionsv1alpha1.LastOperationTypeCreate)
	var clusterScopedPods []string
	for _, p := range releasePods.seen() {
		if (p.Name == bucket.Name+".backupbucket.tf-run" || p.Name == entry.Name+".backupentry.tf-run") && p.Spec.NodeName != "" {
			clusterScopedPods = append(clusterScopedPods, p.Name)
		}
	}
	g.Expect(clusterScopedPods).To(ContainElements(bucket.Name+".backupbucket.tf-run", entry.Name+".backupentry.tf-run"), "the runs of the cluster-scoped kinds ran in the release's namespace")
	etcdBackup := &corev1.Secret{}
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-backup"}, etcdBackup)).To(Succeed())
	g.Expect(etcdBackup.Data).To(Equal(map[string][]byte{"kubeconfig": kubeconfig, "bucketName": []byte(bucket.Name)}), "etcd-backup in the shoot's namespace")

	// What etcd's backups would be: an object under the entry's prefix, a namespace of its
	// own with the local provider.
	markers := &corev1.ConfigMapList{}
	g.Expect(kube.List(ctx, markers, client.InNamespace("bucket-"+ns), client.HasLabels{"app.kubernetes.io/managed-by"})).To(Succeed())
	g.Expect(markers.Items).To(HaveLen(1))
	backup := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: markers.Items[0].Data["backups"], Name: "full-snapshot-1"}, Data: map[string]string{"etcd": "snapshot"}}
	g.Expect(kube.Create(ctx, backup)).To(Succeed())

	deleteKindAndWait(t, entry)
	g.Expect(apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(etcdBackup), &corev1.Secret{}))).To(BeTrue(), "the entry's deletion removed etcd-backup")
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(kube.Get(ctx, client.ObjectKeyFromObject(backup), &corev1.ConfigMap{}))).To(BeTrue(), "the backup under the entry's prefix is removed")
		g.Expect(apierrors.IsNotFound(kube.Get(ctx, client.ObjectKey{Name: backup.Namespace}, &corev1.Namespace{}))).To(BeTrue(), "and the prefix's namespace with it")
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
	deleteKindAndWait(t, bucket)
	g.Eventually(func(g Gomega) {
		bucketNS := &corev1.Namespace{}
		err := kube.Get(ctx, client.ObjectKey{Name: "bucket-" + ns}, bucketNS)
		g.Expect(apierrors.IsNotFound(err) || bucketNS.DeletionTimestamp != nil).To(BeTrue(), "the bucket's namespace is deleted")
	}).WithTimeout(quickAction).Should(Succeed())
}
