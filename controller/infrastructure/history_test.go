package infrastructure_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// Each state an apply leaves is kept in the history, newest first, with its lineage,
// its resources and when it was kept; the state commands list and roll back from there.
func TestEachAppliedStateIsKeptInTheHistory(t *testing.T) {
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

	history, err := s.runObjects().ReadHistory(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	entries := history.Entries
	g.Expect(entries).To(HaveLen(2))
	g.Expect(entries[0]).To(And(HaveField("Serial", two.Serial), HaveField("Lineage", two.Lineage)))
	g.Expect(entries[1]).To(And(HaveField("Serial", one.Serial), HaveField("Lineage", one.Lineage)))
	g.Expect(entries[0].Resources).To(Equal(entries[1].Resources+1), "the second zone")
	g.Expect(entries[0].Time.IsZero()).To(BeFalse())
	kept, err := history.State(entries[1])
	g.Expect(err).NotTo(HaveOccurred())
	var first storedState
	g.Expect(json.Unmarshal(kept, &first)).To(Succeed())
	g.Expect(first.zoneIDs()).To(Equal(one.zoneIDs()))
}
