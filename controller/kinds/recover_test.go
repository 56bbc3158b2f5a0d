package kinds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// recoveredShoot is a local shoot with one zone whose Infrastructure a controller created
// and stopped: what it left behind is the state in the API server only, as after a run
// pod's end.
func recoveredShoot(t *testing.T, opts ...actuatorOption) (*shoot, *controllerUnderTest) {
	t.Helper()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	c := startControllerWith(t, s.namespace, workDir(t), env.Config, 2, opts...)
	NewWithT(t).Expect(env.Client.Create(context.Background(), s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	return s, c
}

// recoveredZonalShoot is recoveredShoot of the zonal test provider, one zone.
func recoveredZonalShoot(t *testing.T) (*shoot, *controllerUnderTest) {
	t.Helper()
	s := zonalShoot(t, 1, false)
	c := startController(t, s.namespace, workDir(t))
	NewWithT(t).Expect(env.Client.Create(context.Background(), s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	return s, c
}

func (s *shoot) runObjects() state.RunObjects {
	return state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
}

// liveUIDs are the UIDs of the objects the local provider created, by kind and name.
func (s *shoot) liveUIDs(g Gomega) map[string]types.UID {
	ctx := context.Background()
	uids := map[string]types.UID{}
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, ns)).To(Succeed())
	uids["Namespace/"+ns.Name] = ns.UID
	policies := &networkingv1.NetworkPolicyList{}
	g.Expect(env.Client.List(ctx, policies, client.InNamespace(s.targetNamespace()))).To(Succeed())
	for _, p := range policies.Items {
		uids["NetworkPolicy/"+p.Name] = p.UID
	}
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "ssh-publickey"}, secret)).To(Succeed())
	uids["Secret/"+secret.Name] = secret.UID
	return uids
}

// deleteState deletes the state object and its parts.
func (s *shoot) deleteState(g Gomega) {
	ctx := context.Background()
	objects := s.runObjects()
	names := append([]string{objects.StateName()}, objects.PartNames()...)
	for _, name := range names {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, keyOf(s.namespace, name), cm); apierrors.IsNotFound(err) {
			continue
		}
		cm.Finalizers = nil
		g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, cm))).To(Succeed())
	}
}

// stateAddresses are the resource addresses of the stored state.
func (s *shoot) stateAddresses(g Gomega) []string {
	raw, err := s.runObjects().ReadState(context.Background(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	held, err := imports.Addresses(raw)
	g.Expect(err).NotTo(HaveOccurred())
	var addresses []string
	for a := range held {
		addresses = append(addresses, a)
	}
	return addresses
}

// assertInSync reconciles once more and expects a plan without changes.
func assertInSync(t *testing.T, s *shoot) {
	t.Helper()
	infra := s.reconciled(t)
	NewWithT(t).Expect(condition(infra, kinds.ConditionLastPlan).Message).To(appliedPlanExactly("0 to add, 0 to change, 0 to replace, 0 to destroy"))
}

// assertRecovered expects a recovery that says so in StateRecovered, created nothing, kept
// every object and left a state that holds every resource and is in sync.
func assertRecovered(t *testing.T, s *shoot, infra *extensionsv1alpha1.Infrastructure, uids map[string]types.UID, addresses []string, says ...string) {
	t.Helper()
	g := NewWithT(t)
	recovered := condition(infra, kinds.ConditionStateRecovered)
	g.Expect(recovered).NotTo(BeNil())
	g.Expect(recovered.Status).To(Equal(extensionsv1alpha1.ConditionTrue))
	for _, part := range says {
		g.Expect(recovered.Message).To(ContainSubstring(part))
	}
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(appliedPlan("0 to add"))
	g.Expect(s.liveUIDs(g)).To(Equal(uids))
	g.Expect(s.stateAddresses(g)).To(ConsistOf(addresses))
	assertInSync(t, s)
}

const localResources = 4 // the namespace, deny-all, zone-0, the SSH key (no Cluster: no shoot networks)

// A state ConfigMap deleted by mistake is found again in the history: every resource
// stays the object it was, nothing is created again.
func TestDeletedStateIsRecoveredFromTheHistory(t *testing.T) {
	g := NewWithT(t)
	s, first := recoveredShoot(t)
	uids := s.liveUIDs(g)
	addresses := s.stateAddresses(g)
	g.Expect(addresses).To(HaveLen(localResources))
	_, stored := s.storedState(g)

	first.stop()
	s.deleteState(g)
	startController(t, s.namespace, workDir(t))
	infra := s.reconciled(t)

	assertRecovered(t, s, infra, uids, addresses, "was missing", fmt.Sprintf("4 from history serial %d", stored.Serial), "0 imported")
}

// A corrupt state with no history left: every resource is imported by its indexed ID.
func TestCorruptStateWithoutHistoryIsRecoveredByImports(t *testing.T) {
	testRecoveryByImports(t)
}

// OpenTofu takes the same import blocks.
func TestCorruptStateWithoutHistoryIsRecoveredByImportsOnOpenTofu(t *testing.T) {
	tofu := testenv.OpenTofu(t)
	testRecoveryByImports(t, func(a *controllerSetup) {
		e := a.Executor.(*executor.LocalExecutor)
		e.Settings.Terraform, e.Settings.OpenTofu = tofu, true
	})
}

func testRecoveryByImports(t *testing.T, opts ...actuatorOption) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t, opts...)
	uids := s.liveUIDs(g)
	addresses := s.stateAddresses(g)

	first.stop()
	objects := s.runObjects()
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), cm)).To(Succeed())
	g.Expect(cm.Annotations).To(HaveKey(state.AnnotationIndex), "the index travels with the state")
	g.Expect(cm.Annotations[state.AnnotationIndex]).NotTo(ContainSubstring("yaml_body"), "the index holds IDs only")
	cm.Data[state.Key] = `{"version":4,"serial":` // cut off
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	history := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.HistoryName()), history)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, history)).To(Succeed())

	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, opts...)
	infra := s.reconciled(t)
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(ContainSubstring("4 to import"))
	assertRecovered(t, s, infra, uids, addresses, "was unreadable", "4 imported")
}

// A restore from a .status.state that carries the index but not the state (it was too
// large for the status) imports every resource instead of creating it.
func TestRestoreFromAnIndexAloneImportsEveryResource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := recoveredShoot(t)
	uids := s.liveUIDs(g)
	addresses := s.stateAddresses(g)

	created := s.get(g)
	s.migrateAndRecreate(t, created.Spec)
	restored := s.get(g)
	var kept map[string]json.RawMessage
	g.Expect(json.Unmarshal(restored.Status.State.Raw, &kept)).To(Succeed())
	g.Expect(kept).To(HaveKey("index"))
	delete(kept, "terraformState")
	raw, err := json.Marshal(kept)
	g.Expect(err).NotTo(HaveOccurred())
	restored.Status.State.Raw = raw
	g.Expect(env.Client.Status().Update(ctx, restored)).To(Succeed())
	annotate(g, s, extension.OperationRestore)

	infra := s.waitHandled(t, extensionsv1alpha1.LastOperationTypeRestore)
	assertRecovered(t, s, infra, uids, addresses, "was missing", "4 imported")
}

// A state older than its index says (an older copy written back) is replaced by the
// newest state of the history: the zone created since is not created again.
func TestStaleStateIsReplacedByTheNewerStateOfTheHistory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredZonalShoot(t)
	older, _ := s.storedState(g)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = zonalConfig(2, false) })
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.ObservedGeneration).To(Equal(current.Generation))
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	_, newer := s.storedState(g)
	g.Expect(newer.zoneIDs()).To(HaveLen(2))

	first.stop()
	g.Expect(s.runObjects().Store(env.Client).Replace(ctx, older)).To(Succeed())
	startController(t, s.namespace, workDir(t))
	infra := s.reconciled(t)
	recovered := condition(infra, kinds.ConditionStateRecovered)
	g.Expect(recovered).NotTo(BeNil())
	g.Expect(recovered.Message).To(ContainSubstring("older than serial %d its index names", newer.Serial))
	g.Expect(recovered.Message).To(ContainSubstring("from history serial %d", newer.Serial))
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(appliedPlan("0 to add"))
	_, after := s.storedState(g)
	g.Expect(after.zoneIDs()).To(Equal(newer.zoneIDs()), "no zone is created a second time")
}

// A lost resource of a type that cannot be imported is named: it is created again.
func TestRecoveryNamesWhatCannotBeImported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredZonalShoot(t)
	addresses := s.stateAddresses(g)

	first.stop()
	s.deleteState(g)
	history := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, s.runObjects().HistoryName()), history)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, history)).To(Succeed())
	startController(t, s.namespace, workDir(t))
	infra := s.reconciled(t)
	recovered := condition(infra, kinds.ConditionStateRecovered)
	g.Expect(recovered).NotTo(BeNil())
	g.Expect(recovered.Message).To(ContainSubstring("0 imported; cannot be imported and are created again: "))
	for _, address := range addresses {
		g.Expect(recovered.Message).To(ContainSubstring(address))
	}
}

// appliedPlan matches a LastPlan message of an applied plan, its digest whichever, whose
// changes start with changes.
func appliedPlan(changes string) gomegatypes.GomegaMatcher {
	return MatchRegexp(`^applied plan sha256:[0-9a-f]{16}: ` + regexp.QuoteMeta(changes))
}

// appliedPlanExactly is appliedPlan of exactly changes.
func appliedPlanExactly(changes string) gomegatypes.GomegaMatcher {
	return MatchRegexp(`^applied plan sha256:[0-9a-f]{16}: ` + regexp.QuoteMeta(changes) + `$`)
}

// A deletion whose state was deleted by mistake destroys what the history's state holds,
// rather than nothing.
func TestDeletionWithItsStateDeletedDestroysWhatTheHistoryHolds(t *testing.T) {
	testDeletionDestroysWhatTheHistoryHolds(t, func(g Gomega, s *shoot) { s.deleteState(g) })
}

// A deletion whose state was cut off destroys what the history's state holds, rather
// than failing on it for ever.
func TestDeletionWithItsStateCutOffDestroysWhatTheHistoryHolds(t *testing.T) {
	testDeletionDestroysWhatTheHistoryHolds(t, func(g Gomega, s *shoot) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), keyOf(s.namespace, s.runObjects().StateName()), cm)).To(Succeed())
		cm.Data[state.Key] = `{"version":4,"serial":` // cut off
		g.Expect(env.Client.Update(context.Background(), cm)).To(Succeed())
	})
}

func testDeletionDestroysWhatTheHistoryHolds(t *testing.T, lose func(Gomega, *shoot)) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t)
	g.Expect(s.stateAddresses(g)).To(HaveLen(localResources))

	first.stop()
	lose(g, s)
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	policies := &networkingv1.NetworkPolicyList{}
	g.Expect(env.Client.List(ctx, policies, client.InNamespace(s.targetNamespace()))).To(Succeed())
	g.Expect(policies.Items).To(BeEmpty(), "the destroy removed what the history's state held")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(s.targetNamespace(), "ssh-publickey"), &corev1.Secret{}))).To(BeTrue())
	assertRunObjectsGone(g, s)
}

// A deletion whose state and history are both lost cannot destroy what only the index
// knows: it stops, names those resources and keeps the index and the run objects, instead
// of deleting every trace of them. The shoot's force deletion lets it go.
func TestDeletionWithItsStateLostBeyondTheHistoryStopsAndNamesWhatWouldBeLeft(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t)
	addresses := s.stateAddresses(g)
	before := realObjects(g, s)

	first.stop()
	s.deleteState(g)
	objects := s.runObjects()
	history := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.HistoryName()), history)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, history)).To(Succeed())
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())

	g.Eventually(func(g Gomega) {
		last := s.get(g).Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Type).To(Equal(extensionsv1alpha1.LastOperationTypeDelete))
		g.Expect(last.State).To(Equal(extensionsv1alpha1.LastOperationStateError))
		g.Expect(last.Description).To(ContainSubstring("was missing, and no state of its history holds 4 resources its index names"))
		for _, address := range addresses {
			g.Expect(last.Description).To(ContainSubstring(address))
		}
		g.Expect(last.Description).To(ContainSubstring(extension.AnnotationForceDeletion))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	g.Expect(realObjects(g, s)).To(Equal(before), "nothing was destroyed")
	g.Expect(s.get(g).Status.State).NotTo(BeNil(), "the index stays with the Infrastructure")
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.ConfigName()), &corev1.ConfigMap{})).To(Succeed(), "the run objects stay")

	forceDeletionConfirmed(t, s)
	s.waitGone(t)
	g.Expect(realObjects(g, s)).To(Equal(before), "a force deletion leaves them")
}

// A state recovered by imports, its history lost with it, is kept in the history, also
// where the run wrote back the state it had kept itself, which the status names already:
// a second loss is recovered from the history instead of by imports again.
func TestStateRecoveredByImportsIsInTheHistory(t *testing.T) {
	cutOff := func(g Gomega, s *shoot) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), keyOf(s.namespace, s.runObjects().StateName()), cm)).To(Succeed())
		cm.Data[state.Key] = `{"version":4,"serial":` // cut off
		g.Expect(env.Client.Update(context.Background(), cm)).To(Succeed())
	}
	deleted := func(g Gomega, s *shoot) { s.deleteState(g) }
	t.Run("deleted, the controller running", func(t *testing.T) { testRecoveredStateIsInTheHistory(t, deleted, false) })
	t.Run("cut off, the controller running", func(t *testing.T) { testRecoveredStateIsInTheHistory(t, cutOff, false) })
	t.Run("deleted, the controller restarted", func(t *testing.T) { testRecoveredStateIsInTheHistory(t, deleted, true) })
}

func testRecoveredStateIsInTheHistory(t *testing.T, lose func(Gomega, *shoot), restart bool) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t)
	uids := s.liveUIDs(g)
	addresses := s.stateAddresses(g)

	if restart {
		first.stop()
	}
	lose(g, s)
	history := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, s.runObjects().HistoryName()), history)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, history)).To(Succeed())
	if restart {
		startController(t, s.namespace, workDir(t))
	}
	infra := s.reconciled(t)

	// The apply that recovered the state kept it: no later apply is needed for that.
	_, live := s.storedState(g)
	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).NotTo(BeEmpty(), "the recovered state is in the history")
	g.Expect(entries[0]).To(And(HaveField("Serial", live.Serial), HaveField("Lineage", live.Lineage), HaveField("Resources", localResources)))
	assertRecovered(t, s, infra, uids, addresses, "4 imported")

	s.deleteState(g)
	infra = s.reconciled(t)
	assertRecovered(t, s, infra, uids, addresses, "was missing", fmt.Sprintf("4 from history serial %d", live.Serial), "0 imported")
}

// A restored state is kept in the history of the Infrastructure it is restored to.
func TestRestoredStateIsInTheHistory(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := recoveredShoot(t)
	created := s.get(g)
	s.migrateAndRecreate(t, created.Spec)
	annotate(g, s, extension.OperationRestore)
	s.waitHandled(t, extensionsv1alpha1.LastOperationTypeRestore)

	_, live := s.storedState(g)
	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).NotTo(BeEmpty(), "the restored state is in the history")
	g.Expect(entries[0]).To(And(HaveField("Serial", live.Serial), HaveField("Lineage", live.Lineage)))
	assertInSync(t, s)
}

// A zone removed while the state and its history were lost: the configuration no longer
// declares its resources, so an apply could neither import nor destroy them. The apply
// stops before it writes anything and names them; once they are removed by hand and the
// removal is confirmed, it recovers the rest and uses the confirmation up.
func TestRecoveryStopsRatherThanLeaveBehindWhatTheConfigurationNoLongerDeclares(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19", "10.250.32.0/19")
	s.createSecret(t, adminKubeconfig(t))
	first := startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(s.stateAddresses(g)).To(ContainElement("kubectl_manifest.zone_1"))

	first.stop()
	s.deleteState(g)
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.runObjects().HistoryName()}})).To(Succeed())
	s.update(t, func(infra *extensionsv1alpha1.Infrastructure) {
		infra.Spec.ProviderConfig = testenv.LocalProviderConfig("10.250.0.0/19")
	})
	startController(t, s.namespace, workDir(t))

	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		g.Expect(infra.Status.LastError).NotTo(BeNil())
		g.Expect(infra.Status.LastError.Description).To(And(
			ContainSubstring("1 resources its index names are in no state of its history and no longer declared by the configuration: kubectl_manifest.zone_1."),
			ContainSubstring(kinds.AnnotationLostRemoved+`="kubectl_manifest.zone_1"`),
		))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	raw, err := s.runObjects().ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).To(BeNil(), "nothing is written")
	g.Expect(s.liveUIDs(g)).To(HaveKey("NetworkPolicy/zone-1"), "nothing is destroyed")

	// The operator removes it and confirms.
	g.Expect(env.Client.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: s.targetNamespace(), Name: "zone-1"}})).To(Succeed())
	s.update(t, func(infra *extensionsv1alpha1.Infrastructure) {
		metav1.SetMetaDataAnnotation(&infra.ObjectMeta, kinds.AnnotationLostRemoved, "kubectl_manifest.zone_1")
	})
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(condition(infra, kinds.ConditionStateRecovered)).To(HaveField("Message", ContainSubstring("4 imported")))
	g.Expect(s.stateAddresses(g)).NotTo(ContainElement("kubectl_manifest.zone_1"))
	g.Expect(s.liveUIDs(g)).NotTo(HaveKey("NetworkPolicy/zone-1"))
	g.Eventually(func(g Gomega) {
		g.Expect(s.get(g).Annotations).NotTo(HaveKey(kinds.AnnotationLostRemoved), "the confirmation is used up")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	assertInSync(t, s)
}
