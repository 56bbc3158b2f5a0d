package executor

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/terraformer"
)

func TestPodExecutorEnsuresAServiceAccountConfinedToItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 1)
	other := env.Namespace(t)
	// The ClusterRole the Helm chart ships; named per test, as ClusterRoles are cluster-wide.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "terraformer-" + f.namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		},
	}
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), role) })

	// A run creates them; no kubelet starts the pod here.
	e := f.podExecutor()
	e.ServiceAccountName = ""
	e.ManageServiceAccount = true
	e.ClusterRole = role.Name
	e.CreationTimeout = time.Second
	_, err := e.Run(ctx, f.request(terraformer.Apply))
	g.Expect(err).To(MatchError(ErrCreationDeadline))

	sa := &corev1.ServiceAccount{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: DefaultServiceAccountName}, sa)).To(Succeed())
	binding := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: DefaultServiceAccountName}, binding)).To(Succeed())
	g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}))
	g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: f.namespace, Name: DefaultServiceAccountName}))

	// Ensuring again changes nothing.
	g.Expect(e.EnsureServiceAccount(ctx, f.namespace)).To(Succeed())
	again := &rbacv1.RoleBinding{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(binding), again)).To(Succeed())
	g.Expect(again.ResourceVersion).To(Equal(binding.ResourceVersion))
	saAgain := &corev1.ServiceAccount{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sa), saAgain)).To(Succeed())
	g.Expect(saAgain.ResourceVersion).To(Equal(sa.ResourceVersion))

	// As the ServiceAccount, the terraformer reads and writes ConfigMaps and reads
	// Secrets in its namespace, and nothing in another.
	asRun := rest.CopyConfig(env.Config)
	asRun.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + f.namespace + ":" + DefaultServiceAccountName}
	c, err := client.New(asRun, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { // RBAC caches catch up with the new binding.
		return c.Get(ctx, client.ObjectKey{Namespace: f.namespace, Name: f.objects.ConfigName()}, &corev1.ConfigMap{})
	}).WithTimeout(10 * time.Second).Should(Succeed())
	for _, ns := range []string{f.namespace, other} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "written-by-the-run"}, Data: map[string]string{"a": "1"}}
		secret := &corev1.Secret{}
		results := []error{
			c.Create(ctx, cm),
			c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)),
			c.Get(ctx, client.ObjectKey{Namespace: ns, Name: f.objects.VarsName()}, secret),
		}
		if ns == f.namespace {
			cm.Data["a"] = "2"
			results = append(results, c.Update(ctx, cm))
			for _, err := range results {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(c.Delete(ctx, secret)).To(Satisfy(apierrors.IsForbidden), "secrets are read only")
			continue
		}
		for _, err := range results {
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "in namespace %s: %v", ns, err)
		}
	}
}
