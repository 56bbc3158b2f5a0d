package infrastructure_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/infrastructure"
	"github.com/terraseed/terraseed/terraform/state"
)

// A state rolled back to an older serial becomes the live one as a newer serial of the
// same lineage, and can be rolled forward again the same way.
func TestRollbackToAnOlderSerialAndBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdZonalShoot(t)
	_, one := s.storedState(g)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = zonalConfig(2, false) })
	g.Eventually(func(g Gomega) {
		_, two := s.storedState(g)
		g.Expect(two.zoneIDs()).To(HaveLen(2))
		current := s.get(g)
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
		g.Expect(current.Status.ObservedGeneration).To(Equal(current.Generation))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	_, two := s.storedState(g)

	entries, err := infrastructure.StateHistory(ctx, env.Client, s.key())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2))
	g.Expect(entries[0]).To(And(HaveField("Serial", two.Serial), HaveField("Lineage", two.Lineage)))
	g.Expect(entries[1]).To(And(HaveField("Serial", one.Serial), HaveField("Lineage", one.Lineage)))
	g.Expect(entries[0].Resources).To(Equal(entries[1].Resources+1), "the second zone")
	g.Expect(entries[0].Time.IsZero()).To(BeFalse())

	back, err := infrastructure.RollbackState(ctx, env.Client, s.key(), one.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(two.Serial + 1))
	_, live := s.storedState(g)
	g.Expect(live.Serial).To(Equal(back))
	g.Expect(live.Lineage).To(Equal(one.Lineage))
	g.Expect(live.zoneIDs()).To(Equal(one.zoneIDs()))

	forth, err := infrastructure.RollbackState(ctx, env.Client, s.key(), two.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(forth).To(Equal(back + 1))
	_, live = s.storedState(g)
	g.Expect(live.zoneIDs()).To(Equal(two.zoneIDs()))

	_, err = infrastructure.RollbackState(ctx, env.Client, s.key(), 999)
	g.Expect(err).To(MatchError(infrastructure.ErrNotInHistory))

	// The live state is another infrastructure's: nothing of this history replaces it.
	raw, _ := s.storedState(g)
	var other map[string]any
	g.Expect(json.Unmarshal(raw, &other)).To(Succeed())
	other["lineage"] = "another-lineage"
	otherRaw, err := json.Marshal(other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.runObjects().Store(env.Client).Replace(ctx, otherRaw)).To(Succeed())
	_, err = infrastructure.RollbackState(ctx, env.Client, s.key(), one.Serial)
	g.Expect(err).To(MatchError(state.ErrLineageMismatch))
	g.Expect(err).To(MatchError(ContainSubstring("another-lineage")))
	after, _ := s.storedState(g)
	g.Expect(after).To(Equal(otherRaw))
}

// No rollback while a run may write the state.
func TestRollbackIsRefusedWhileARunIsUnderWay(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowShoot(t, `{"steps":1,"seconds":1}`)
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	entries, err := infrastructure.StateHistory(ctx, env.Client, s.key())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))

	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Spec.ProviderConfig.Raw = []byte(`{"steps":2,"seconds":30}`)
	})
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateProcessing)
	s.waitForRunStart(t)
	_, err = infrastructure.RollbackState(ctx, env.Client, s.key(), entries[0].Serial)
	g.Expect(err).To(MatchError(infrastructure.ErrRunUnderWay))
}
