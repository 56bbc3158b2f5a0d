package controlplane_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// TestSelfHostedShootWithoutSeed creates a ControlPlane of a self-hosted shoot, whose
// Cluster (as gardenadm writes it, Gardener v1.147 and later) has no spec.seed: the
// Cluster is accepted and the control plane is deployed.
func TestSelfHostedShootWithoutSeed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "local", localConfig(1))
	cluster := &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: cp.Namespace},
		Spec: extensionsv1alpha1.ClusterSpec{
			Shoot:        runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"self-hosted"},"spec":{"kubernetes":{"version":"1.34.0"}}}`)},
			CloudProfile: runtime.RawExtension{Raw: []byte(`{}`)},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
	startController(t, cp.Namespace)

	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	waitFor(t, cp, extensionsv1alpha1.LastOperationTypeCreate)
	g.Eventually(func(g Gomega) { deployment(g, cp.Namespace) }).Should(Succeed())
}
