package terraformer

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

func TestGardenerWrittenObjectsAreReadAndUpdatedInPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 2)
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	before := f.Items(g)
	g.Expect(before).To(HaveLen(2))

	// Make the objects look as Gardener's terraformer leaves them: a plain state without
	// our annotations, and variables in HCL under terraform.tfvars.
	stored := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.StateName()}, stored)).To(Succeed())
	stored.Annotations, stored.Labels, stored.Finalizers = nil, nil, nil
	g.Expect(env.Client.Update(ctx, stored)).To(Succeed())
	vars := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.VarsName()}, vars)).To(Succeed())
	vars.Data = map[string][]byte{state.VarsHCLKey: fmt.Appendf(nil, "namespace = %q\nresources = 3\n", f.Namespace)}
	vars.Finalizers = nil
	g.Expect(env.Client.Update(ctx, vars)).To(Succeed())
	config := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ConfigName()}, config)).To(Succeed())
	config.Finalizers = nil
	g.Expect(env.Client.Update(ctx, config)).To(Succeed())

	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	after := f.Items(g)
	g.Expect(after).To(HaveLen(3))
	g.Expect(after).To(ContainElements(before), "the existing objects were known from the Gardener state")

	updated := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stored), updated)).To(Succeed())
	g.Expect(updated.UID).To(Equal(stored.UID))
	g.Expect(updated.Data[state.Key]).NotTo(Equal(stored.Data[state.Key]))
	g.Expect(updated.BinaryData).To(BeEmpty())
	names, _ := f.StateItems(g)
	g.Expect(names).To(Equal(after))
	g.Expect(f.Finalizers(g)).To(HaveEach(ConsistOf(state.Finalizer)), "the run claimed the objects it found unclaimed")
}
