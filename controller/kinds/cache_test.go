package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
	runpkg "github.com/terraseed/terraseed/terraform/run"
	tfstate "github.com/terraseed/terraseed/terraform/state"
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

// The deletion of a state object is watched by its metadata, in either kind of object a
// state is kept in: the cache keeps those of the run objects alone, not of every ConfigMap
// and Secret of the seed, which grow with the seed and not with the objects served.
func TestTheCacheKeepsTheMetadataOfRunObjectsAlone(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := env.Namespace(t)
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Client.Scheme(), ByObject: kinds.CachedInfrastructures()})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()

	for _, storage := range tfstate.Storages {
		kind := storage.Kind()
		run := storage.Object()
		run.SetNamespace(ns)
		run.SetName("infra.infra.tf-state")
		run.SetLabels(map[string]string{runpkg.LabelPurpose: string(runpkg.PurposeInfra)})
		other := storage.Object()
		other.SetNamespace(ns)
		other.SetName("someone-elses")
		g.Expect(env.Client.Create(ctx, run)).To(Succeed())
		g.Expect(env.Client.Create(ctx, other)).To(Succeed())

		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
		g.Eventually(func(g Gomega) {
			g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			names := []string{}
			for _, item := range list.Items {
				names = append(names, item.Name)
			}
			g.Expect(names).To(ContainElement("infra.infra.tf-state"))
			g.Expect(names).NotTo(ContainElement("someone-elses"), "a %s that holds no state is not cached", kind)
		}).WithTimeout(10 * time.Second).Should(Succeed())
	}
}
