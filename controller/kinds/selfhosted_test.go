package kinds_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// TestSelfHostedShootWithoutSeed creates and deletes the Infrastructure of a self-hosted
// shoot, whose Cluster (as gardenadm writes it, Gardener v1.147 and later) has no
// spec.seed: the Cluster is accepted, its shoot is read (the nodes network the zones'
// workers must lie in), and terraform applies and destroys.
func TestSelfHostedShootWithoutSeed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	cluster := &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: s.namespace},
		Spec: extensionsv1alpha1.ClusterSpec{
			Shoot: runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"self-hosted"},` +
				`"spec":{"networking":{"nodes":"10.250.0.0/18"}}}`)},
			CloudProfile: runtime.RawExtension{Raw: []byte(`{}`)},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
	startController(t, s.namespace, workDir(t))

	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(infra.Status.NodesCIDR).To(HaveValue(Equal("10.250.0.0/18")), "the nodes network is the shoot's")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, &networkingv1.NetworkPolicy{})).To(Succeed())

	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
}
