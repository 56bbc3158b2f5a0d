package localtest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/internal/tftest"
)

// applyKind renders obj with the local provider's directory for kind, applies it with
// real terraform against the test control plane and returns the status it reports.
func applyKind(t *testing.T, tf **tftest.Terraform, kind templates.Kind, obj templates.KindObject) *templates.KindStatus {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	registry, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	k, err := registry.Kind(kind, "local")
	g.Expect(err).NotTo(HaveOccurred())
	out, err := k.Render(templates.KindInput{Object: obj})
	g.Expect(err).NotTo(HaveOccurred())
	creds, err := k.Credentials(&corev1.Secret{Data: map[string][]byte{"kubeconfig": kubeconfig(t)}})
	g.Expect(err).NotTo(HaveOccurred())
	if *tf == nil {
		*tf = tftest.New(t, out, creds)
		g.Expect((*tf).Init(ctx)).To(Succeed())
	} else {
		(*tf).Rewrite(t, out)
	}
	g.Expect((*tf).Apply(ctx)).To(Succeed())
	outputs, err := (*tf).Outputs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	status, err := k.Status(outputs)
	g.Expect(err).NotTo(HaveOccurred())
	return status
}

// A DNSRecord is a ConfigMap of the zone found from its name; a change of its values
// changes it in place, and destroy removes it.
func TestDNSRecordApplyChangeAndDestroy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	namespace := env.Namespace(t)
	record := &extensionsv1alpha1.DNSRecord{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: namespace},
		Spec: extensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"namespace": "` + namespace + `"}`)}},
			SecretRef:   corev1.SecretReference{Name: "dns"},
			Name:        "api.foobar.example.com",
			RecordType:  extensionsv1alpha1.DNSRecordTypeA,
			Values:      []string{"192.0.2.10"},
		},
	}
	var tf *tftest.Terraform
	status := applyKind(t, &tf, templates.KindDNSRecord, record)
	g.Expect(status.Fields).To(Equal(map[string]string{"zone": "foobar.example.com"}))

	resolve := func() map[string]string {
		list := &corev1.ConfigMapList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace), client.HasLabels{"dns.terraseed.io/zone"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		return list.Items[0].Data
	}
	g.Expect(resolve()).To(Equal(map[string]string{"name": "api.foobar.example.com", "type": "A", "zone": "foobar.example.com", "ttl": "120", "values": `["192.0.2.10"]`}))

	record.Spec.Values = []string{"192.0.2.10", "192.0.2.11"}
	record.Spec.TTL = ptr(int64(300))
	applyKind(t, &tf, templates.KindDNSRecord, record)
	g.Expect(resolve()).To(And(HaveKeyWithValue("values", `["192.0.2.10","192.0.2.11"]`), HaveKeyWithValue("ttl", "300")))

	g.Expect(tf.Destroy(ctx)).To(Succeed())
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace), client.HasLabels{"dns.terraseed.io/zone"})).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
}

// A BackupBucket is a namespace, which generates no Secret; a BackupEntry
// is a ConfigMap in it, named by the entry's prefix. Each is destroyed on its own.
func TestBackupBucketAndEntryApplyAndDestroy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Names are unique per run: envtest keeps a deleted namespace Terminating.
	bucketName := env.Namespace(t)
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: bucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local", SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
		},
	}
	var bucketTF *tftest.Terraform
	status := applyKind(t, &bucketTF, templates.KindBackupBucket, bucket)
	g.Expect(status.GeneratedSecret).To(BeNil(), "no generated Secret: the entries get the bucket's kubeconfig")
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "bucket-" + bucketName}, ns)).To(Succeed())

	entry := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--foobar--local--1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local", BucketName: bucketName, SecretRef: corev1.SecretReference{Name: "backup", Namespace: "garden"},
		},
	}
	var entryTF *tftest.Terraform
	applyKind(t, &entryTF, templates.KindBackupEntry, entry)
	entries := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(ctx, entries, client.InNamespace("bucket-"+bucketName))).To(Succeed())
	var prefixes []string
	for _, cm := range entries.Items {
		if cm.Data["prefix"] != "" {
			prefixes = append(prefixes, cm.Data["prefix"])
		}
	}
	g.Expect(prefixes).To(Equal([]string{entry.Name}))

	g.Expect(entryTF.Destroy(ctx)).To(Succeed())
	g.Expect(env.Client.List(ctx, entries, client.InNamespace("bucket-"+bucketName), client.HasLabels{"app.kubernetes.io/managed-by"})).To(Succeed())
	g.Expect(entries.Items).To(BeEmpty())
	g.Expect(bucketTF.Destroy(ctx)).To(Succeed())
	expectNamespaceDeleted(g, "bucket-"+bucketName)
}

// A Bastion is a pod, a Service for SSH and NetworkPolicies that let SSH in from its
// ingress blocks only; all of it goes with destroy.
func TestBastionApplyAndDestroy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := &extensionsv1alpha1.Bastion{
		ObjectMeta: metav1.ObjectMeta{Name: "cli-abcd1234", Namespace: env.Namespace(t)},
		Spec: extensionsv1alpha1.BastionSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"},
			UserData:    []byte("#!/bin/sh\necho ssh-ed25519 AAAA >> /home/gardener/.ssh/authorized_keys\n"),
			Ingress: []extensionsv1alpha1.BastionIngressPolicy{
				{IPBlock: networkingv1.IPBlock{CIDR: "203.0.113.0/24", Except: []string{"203.0.113.7/32"}}},
				{IPBlock: networkingv1.IPBlock{CIDR: "2001:db8::/32"}},
			},
		},
	}
	var tf *tftest.Terraform
	status := applyKind(t, &tf, templates.KindBastion, b)
	g.Expect(status.Fields).To(HaveKey("ingress.hostname"))
	hostname := status.Fields["ingress.hostname"]
	g.Expect(hostname).To(MatchRegexp(`^bastion\.bastion-[0-9a-f]{40}\.svc$`))
	namespace := hostname[len("bastion.") : len(hostname)-len(".svc")]

	pod := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bastion"}, pod)).To(Succeed())
	g.Expect(pod.Spec.Volumes[0].Secret.SecretName).To(Equal("user-data"))
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "user-data"}, secret)).To(Succeed())
	g.Expect(secret.Data["user-data"]).To(Equal(b.Spec.UserData))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bastion"}, &corev1.Service{})).To(Succeed())
	ssh := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "ssh"}, ssh)).To(Succeed())
	g.Expect(ssh.Spec.Ingress).To(HaveLen(1))
	g.Expect(ssh.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{
		{IPBlock: &networkingv1.IPBlock{CIDR: "203.0.113.0/24", Except: []string{"203.0.113.7/32"}}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32"}},
	}))
	g.Expect(ssh.Spec.Ingress[0].Ports[0].Port.IntValue()).To(Equal(22))

	g.Expect(tf.Destroy(ctx)).To(Succeed())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bastion"}, &corev1.Pod{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the bastion pod survived destroy: %v", err)
	expectNamespaceDeleted(g, namespace)
}

// expectNamespaceDeleted: envtest runs no namespace controller, so a deleted namespace
// stays Terminating.
func expectNamespaceDeleted(g Gomega, name string) {
	ns := &corev1.Namespace{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, ns)
	if err == nil {
		g.Expect(ns.DeletionTimestamp).NotTo(BeNil(), "namespace %s was not deleted", name)
	} else {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}
}

func ptr[T any](v T) *T { return &v }
