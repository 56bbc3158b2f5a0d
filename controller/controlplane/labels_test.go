package controlplane_test

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/controlplane"
)

// earlierOwnerLabelGroup is the domain of the owner labels before every label of terraseed
// moved under terraseed.gardener.cloud.
const earlierOwnerLabelGroup = "controlplane.terraseed.io"

// TestObjectsLabelledByAnEarlierVersionAreRelabelled: a ControlPlane applied by a version
// that labelled its objects under controlplane.terraseed.io is applied again, without a
// change of its spec or an operation annotation, once the controller restarts; its objects
// then carry the owner labels of the one domain and lose the earlier ones.
func TestObjectsLabelledByAnEarlierVersionAreRelabelled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "local", localConfig(1))
	ns := cp.Namespace

	t.Run("earlier version", func(t *testing.T) {
		startController(t, ns, func(a *controlplane.Actuator) {
			live, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			a.Resources = ssa.NewResourceManager(live, nil, ssa.Owner{Field: controlplane.FieldManager, Group: earlierOwnerLabelGroup})
		})
		g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
		waitFor(t, cp, extensionsv1alpha1.LastOperationTypeCreate)
		g.Expect(deployment(g, ns).Labels).To(HaveKeyWithValue(earlierOwnerLabelGroup+"/name", cp.Name))
	})

	startController(t, ns)
	g.Eventually(func(g Gomega) {
		labels := deployment(g, ns).Labels
		g.Expect(labels).To(HaveKeyWithValue("controlplane.terraseed.gardener.cloud/name", cp.Name))
		g.Expect(labels).To(HaveKeyWithValue("controlplane.terraseed.gardener.cloud/namespace", ns))
		g.Expect(labels).NotTo(HaveKey(earlierOwnerLabelGroup + "/name"))
		g.Expect(labels).NotTo(HaveKey(earlierOwnerLabelGroup + "/namespace"))
	}).WithTimeout(timeout).Should(Succeed())
}
