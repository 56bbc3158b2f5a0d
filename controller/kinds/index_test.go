package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/state"
)

// The index kept on the state object is written by whoever may update that object, a
// run among them: a recovery never imports what it names, only what the controller's own
// index (.status.state) does. An index naming another object, at a serial above the
// status's, takes nothing.
func TestRecoveryImportsNothingTheStateObjectsIndexNames(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t)
	uids := s.liveUIDs(g)
	addresses := s.stateAddresses(g)
	_, stored := s.storedState(g)
	// An object of someone else's, which a hostile index names as this Infrastructure's zone.
	victim := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "victim"}}
	g.Expect(env.Client.Create(ctx, victim)).To(Succeed())

	first.stop()
	hostile, err := imports.Encode(&imports.Index{Serial: stored.Serial + 100, Lineage: stored.Lineage, IDs: map[string]string{
		"kubectl_manifest.zone_0": "networking.k8s.io/v1//NetworkPolicy//victim//" + s.namespace,
	}})
	g.Expect(err).NotTo(HaveOccurred())
	objects := s.runObjects()
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), cm)).To(Succeed())
	cm.Annotations[state.AnnotationIndex] = hostile
	cm.Data[state.Key] = `{"version":4,"serial":` // cut off
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	history := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.HistoryName()), history)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, history)).To(Succeed())

	startController(t, s.namespace, workDir(t))
	infra := s.reconciled(t)
	assertRecovered(t, s, infra, uids, addresses, "was unreadable", "4 imported")
	after := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, "victim"), after)).To(Succeed())
	g.Expect(after.UID).To(Equal(victim.UID), "the object the annotation named is untouched")
}

// The state a failed apply left is in the history: what it created is in no index the
// controller trusts, and is found again from the history should the state be lost before
// an apply succeeds, rather than created a second time.
func TestStateAFailedApplyLeftIsInTheHistory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredZonalShoot(t)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = zonalConfig(2, true) })
	var failed storedState
	g.Eventually(func(g Gomega) {
		last := s.get(g).Status.LastOperation
		g.Expect(last.State).To(Equal(extensionsv1alpha1.LastOperationStateError))
		g.Expect(last.Description).To(ContainSubstring("QuotaExceeded"))
		_, failed = s.storedState(g)
		g.Expect(failed.zoneIDs()).To(HaveLen(2))
		entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries[0]).To(And(HaveField("Serial", failed.Serial), HaveField("Lineage", failed.Lineage)))
	}).WithTimeout(3 * time.Minute).Should(Succeed())

	first.stop()
	s.deleteState(g)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = zonalConfig(2, false) })
	startController(t, s.namespace, workDir(t))
	infra := s.reconciled(t)
	g.Expect(condition(infra, kinds.ConditionStateRecovered).Message).To(ContainSubstring("from history serial %d", failed.Serial))
	_, after := s.storedState(g)
	g.Expect(after.zoneIDs()).To(Equal(failed.zoneIDs()), "the zone the failed apply created is not created again")
}

// What a failed apply created is in the index the controller trusts (.status.state): should
// the state and its history both be lost before an apply succeeds, the recovery still
// knows it, and names it.
func TestWhatAFailedApplyCreatedIsInTheTrustedIndex(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredZonalShoot(t)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = zonalConfig(2, true) })
	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateError))
		g.Expect(infra.Status.LastOperation.Description).To(ContainSubstring("QuotaExceeded"))
		g.Expect(infra.Status.State).NotTo(BeNil())
		var kept struct{ Index imports.Index }
		g.Expect(json.Unmarshal(infra.Status.State.Raw, &kept)).To(Succeed())
		g.Expect(kept.Index.Unimportable).To(ContainElement("terraform_data.zone[1]"), "the zone the failed apply created")
	}).WithTimeout(3 * time.Minute).Should(Succeed())

	first.stop()
	s.deleteState(g)
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.runObjects().HistoryName()}})).To(Succeed())
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = zonalConfig(2, false) })
	startController(t, s.namespace, workDir(t))
	infra := s.reconciled(t)
	g.Expect(condition(infra, kinds.ConditionStateRecovered).Message).To(ContainSubstring("cannot be imported and are created again: terraform_data.quota, terraform_data.zone[0], terraform_data.zone[1]"))
}

// A state of the history that expands beyond the controller's bound is not passed over
// for an older one, which holds less: the apply that would recover from it fails naming
// the bound, and writes neither the state nor its history.
func TestAHistoryStateOverTheBoundIsNotPassedOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t)
	raw, stored := s.storedState(g)
	uids := realObjects(g, s)
	var fields map[string]any
	g.Expect(json.Unmarshal(raw, &fields)).To(Succeed())
	fields["serial"] = stored.Serial + 1
	fields["check_results"] = strings.Repeat("a", 4<<20)
	large, err := json.Marshal(fields)
	g.Expect(err).NotTo(HaveOccurred())
	objects := s.runObjects()
	_, err = objects.AppendHistory(ctx, env.Client, large, 5, metav1.Now())
	g.Expect(err).NotTo(HaveOccurred())

	first.stop()
	s.deleteState(g)
	before := storedObjects(g, objects)
	bound := 1 << 20
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, boundedTo(bound))
	refusedReconcile(t, s, "is not taken for lost", "the state history", objects.HistoryName(), fmt.Sprintf("more than %d bytes", bound))
	g.Expect(storedObjects(g, objects)).To(Equal(before), "neither the state nor its history is written")
	g.Expect(realObjects(g, s)).To(Equal(uids), "nothing was created again")
}
