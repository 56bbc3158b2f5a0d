package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// The cache keeps an Infrastructure without its index (.status.state, up to 1 MiB of
// each): a reconcile reads its own from the API server, and the adoption check the
// others' (TestAdoptionRefusesAnIDAnotherInfrastructureHolds).
func TestTheCacheKeepsNoIndex(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	c := startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(infra.Status.State).NotTo(BeNil(), "the API server's")

	g.Eventually(func(g Gomega) {
		cached := &extensionsv1alpha1.Infrastructure{}
		g.Expect(c.cached.Get(ctx, client.ObjectKeyFromObject(infra), cached)).To(Succeed())
		g.Expect(cached.Status.LastOperation).To(HaveField("State", extensionsv1alpha1.LastOperationStateSucceeded))
		g.Expect(cached.Status.State).To(BeNil())
		g.Expect(cached.ManagedFields).To(BeEmpty())
	}).WithTimeout(10 * time.Second).Should(Succeed())
}
