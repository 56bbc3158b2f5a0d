package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// twoZonesApplied changes the local shoot s from one zone to two, which adds a resource,
// and returns its stored state before and after.
func twoZonesApplied(t *testing.T, s *shoot) (one, two storedState) {
	t.Helper()
	g := NewWithT(t)
	_, one = s.storedState(g)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Spec.ProviderConfig = testenv.LocalProviderConfig("10.250.0.0/19", "10.250.32.0/19")
	})
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.ObservedGeneration).To(Equal(current.Generation))
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
		_, two = s.storedState(g)
		g.Expect(two.Serial).To(BeNumerically(">", one.Serial))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	return one, two
}

// A state rolled back to an older serial becomes the live one as a newer serial of the
// same lineage, and can be rolled forward again the same way.
func TestRollbackToAnOlderSerialAndBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdShoot(t, "10.250.0.0/19")
	oneAddresses := s.stateAddresses(g)
	one, two := twoZonesApplied(t, s)
	twoAddresses := s.stateAddresses(g)

	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2))
	g.Expect(entries[0]).To(And(HaveField("Serial", two.Serial), HaveField("Lineage", two.Lineage)))
	g.Expect(entries[1]).To(And(HaveField("Serial", one.Serial), HaveField("Lineage", one.Lineage)))
	g.Expect(entries[0].Resources).To(Equal(entries[1].Resources+1), "the second zone")
	g.Expect(entries[0].Time.IsZero()).To(BeFalse())

	back, err := kinds.RollbackState(ctx, env.Client, s.ref(), one.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(Equal(two.Serial + 1))
	_, live := s.storedState(g)
	g.Expect(live.Serial).To(Equal(back))
	g.Expect(live.Lineage).To(Equal(one.Lineage))
	g.Expect(s.stateAddresses(g)).To(ConsistOf(oneAddresses))

	forth, err := kinds.RollbackState(ctx, env.Client, s.ref(), two.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(forth).To(Equal(back + 1))
	g.Expect(s.stateAddresses(g)).To(ConsistOf(twoAddresses))

	_, err = kinds.RollbackState(ctx, env.Client, s.ref(), 999)
	g.Expect(err).To(MatchError(kinds.ErrNotInHistory))

	// The live state is another infrastructure's: nothing of this history replaces it.
	raw, _ := s.storedState(g)
	var other map[string]any
	g.Expect(json.Unmarshal(raw, &other)).To(Succeed())
	other["lineage"] = "another-lineage"
	otherRaw, err := json.Marshal(other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.runObjects().Store(env.Client).Replace(ctx, otherRaw)).To(Succeed())
	_, err = kinds.RollbackState(ctx, env.Client, s.ref(), one.Serial)
	g.Expect(err).To(MatchError(state.ErrLineageMismatch))
	g.Expect(err).To(MatchError(ContainSubstring("another-lineage")))
	after, _ := s.storedState(g)
	g.Expect(after).To(Equal(otherRaw))
}

// A rollback forgets nothing: what the live state held and the older state lacks is
// imported by the next apply, never created a second time, and stays the object it was.
func TestRollbackImportsWhatTheLiveStateHeld(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdShoot(t, "10.250.0.0/19")
	one, _ := twoZonesApplied(t, s)
	uids := s.liveUIDs(g)
	addresses := s.stateAddresses(g)

	_, err := kinds.RollbackState(ctx, env.Client, s.ref(), one.Serial)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.get(g).Annotations).To(HaveKeyWithValue(kinds.AnnotationImport,
		`{"kubectl_manifest.zone_1":"networking.k8s.io/v1//NetworkPolicy//zone-1//`+s.targetNamespace()+`"}`))
	infra := s.reconciled(t)
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(And(appliedPlan("0 to add"), ContainSubstring("1 to import (kubectl_manifest.zone_1)")))
	g.Expect(s.liveUIDs(g)).To(Equal(uids), "no object was made again")
	g.Expect(s.stateAddresses(g)).To(ConsistOf(addresses))
	g.Eventually(func(g Gomega) {
		g.Expect(s.get(g).Annotations).NotTo(HaveKey(kinds.AnnotationImport), "the apply that imported used it up")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	assertInSync(t, s)
}

// A rollback to a state that lacks a resource the live state holds and no import brings
// back (terraform_data) is refused, naming it, and writes nothing: the next apply would
// create it a second time.
func TestRollbackRefusesToForgetWhatNoImportBringsBack(t *testing.T) {
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
	before := storedObjects(g, s.runObjects())

	_, err := kinds.RollbackState(ctx, env.Client, s.ref(), one.Serial)
	g.Expect(err).To(MatchError(kinds.ErrRollbackWouldForget))
	g.Expect(err).To(MatchError(ContainSubstring("terraform_data.zone[1]")))
	g.Expect(err).To(MatchError(ContainSubstring("nothing is written")))
	g.Expect(storedObjects(g, s.runObjects())).To(Equal(before))
	g.Expect(s.get(g).Annotations).NotTo(HaveKey(kinds.AnnotationImport))
}

// No rollback while a run may write the state.
func TestRollbackIsRefusedWhileARunIsUnderWay(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowShoot(t, `{"steps":1,"seconds":1}`)
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))

	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Spec.ProviderConfig.Raw = []byte(`{"steps":2,"seconds":30}`)
	})
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateProcessing)
	s.waitForRunStart(t)
	_, err = kinds.RollbackState(ctx, env.Client, s.ref(), entries[0].Serial)
	g.Expect(err).To(MatchError(kinds.ErrRunUnderWay))
}

// networkID is the id of the guarded provider's network in a stored state.
func networkID(st storedState) string {
	for _, r := range st.Resources {
		if r.Type == "terraform_data" && r.Name == "network" && len(r.Instances) == 1 {
			return r.Instances[0].Attributes.ID
		}
	}
	return ""
}

// A rollback to a state that holds a resource replaced since (same address, another ID)
// is refused, naming the address and both IDs, and writes nothing: the older state would
// bind the address to the object destroyed and forget the live one.
func TestRollbackRefusesAResourceTheLiveStateHoldsUnderAnotherID(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newGuardedShoot(t, "token-1")
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	_, one := s.storedState(g)

	// A new network replaces it, once allowed.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = guardedConfig("10.1.0.0/16", "a") })
	digest, _ := refusedPlan(t, s, "")
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		metav1.SetMetaDataAnnotation(&i.ObjectMeta, kinds.AnnotationAllowDestroy, digest)
	})
	var two storedState
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
		g.Expect(providerStatusField(g, current, "network")).To(Equal("10.1.0.0/16"))
		_, two = s.storedState(g)
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Expect(networkID(one)).NotTo(BeEmpty())
	g.Expect(networkID(two)).NotTo(Equal(networkID(one)), "replaced")
	before := storedObjects(g, s.runObjects())

	_, err := kinds.RollbackState(ctx, env.Client, s.ref(), one.Serial)
	g.Expect(err).To(MatchError(kinds.ErrRollbackWouldRebind))
	g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf(`terraform_data.network (live %q, serial %d %q)`, networkID(two), one.Serial, networkID(one)))))
	g.Expect(err).To(MatchError(ContainSubstring("nothing is written")))
	g.Expect(storedObjects(g, s.runObjects())).To(Equal(before))
	_, live := s.storedState(g)
	g.Expect(networkID(live)).To(Equal(networkID(two)), "the live network is still held")
}
