package kinds_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

func guardedConfig(network, label string) *runtime.RawExtension {
	return &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"network":%q,"label":%q}`, network, label)}
}

// newGuardedShoot is a shoot of the guarded test provider, whose network is protected.
func newGuardedShoot(t *testing.T, token string) *shoot {
	t.Helper()
	s := newShoot(t)
	s.infra.Spec.Type = "guarded"
	s.infra.Spec.ProviderConfig = guardedConfig("10.0.0.0/16", "a")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "cloudprovider"}, Data: map[string][]byte{"token": []byte(token)}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
	return s
}

func (s *shoot) update(t *testing.T, change func(*extensionsv1alpha1.Infrastructure)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		current := s.get(g)
		change(current)
		g.Expect(env.Client.Update(context.Background(), current)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func condition(infra *extensionsv1alpha1.Infrastructure, t extensionsv1alpha1.ConditionType) *extensionsv1alpha1.Condition {
	for i := range infra.Status.Conditions {
		if infra.Status.Conditions[i].Type == t {
			return &infra.Status.Conditions[i]
		}
	}
	return nil
}

func providerStatusField(g Gomega, infra *extensionsv1alpha1.Infrastructure, field string) any {
	var status map[string]any
	g.Expect(json.Unmarshal(infra.Status.ProviderStatus.Raw, &status)).To(Succeed())
	return status[field]
}

// TestDestroyGuardStopsAReplacementOfAProtectedResource changes an Infrastructure so that
// its plan replaces a resource of a protected type: the apply stops before it changes
// anything, with an error and an event naming the address, until the annotation allows
// it once. A change in place goes through, and so does the deletion.
func TestDestroyGuardStopsAReplacementOfAProtectedResource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newGuardedShoot(t, "token-1")
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	plan := condition(infra, kinds.ConditionLastPlan)
	g.Expect(plan).NotTo(BeNil())
	g.Expect(plan.Status).To(Equal(extensionsv1alpha1.ConditionTrue))
	g.Expect(plan.Message).To(MatchRegexp(`^applied plan sha256:[0-9a-f]{16}: 1 to add \(terraform_data\.network\), 0 to change, 0 to replace, 0 to destroy$`))

	// In place: not guarded.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = guardedConfig("10.0.0.0/16", "b") })
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.ObservedGeneration).To(Equal(current.Generation))
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
		g.Expect(condition(current, kinds.ConditionLastPlan).Message).To(MatchRegexp(`^applied plan sha256:[0-9a-f]{16}: 0 to add, 1 to change \(terraform_data\.network\)`))
	}).WithTimeout(3 * time.Minute).Should(Succeed())

	// A replacement: refused, terminally, naming the address.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = guardedConfig("10.1.0.0/16", "b") })
	infra = s.waitFor(t, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateError)
	t.Logf("refused: %s", infra.Status.LastError.Description)
	g.Expect(infra.Status.LastError.Description).To(And(
		ContainSubstring("terraform_data.network (replace)"), ContainSubstring("nothing was changed"), ContainSubstring(kinds.AnnotationAllowDestroy)))
	g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	g.Expect(condition(infra, kinds.ConditionLastPlan).Status).To(Equal(extensionsv1alpha1.ConditionFalse))
	g.Expect(condition(infra, kinds.ConditionLastPlan).Reason).To(Equal(kinds.ReasonDestroyProtected))
	g.Expect(providerStatusField(g, infra, "network")).To(Equal("10.0.0.0/16"), "the old network stands")
	g.Eventually(func(g Gomega) []string { return eventReasons(g, s.namespace, s.infra.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElement(kinds.ReasonDestroyProtected))
	// Terminal: not retried while nothing changes.
	failedAt := infra.Status.LastOperation.LastUpdateTime
	g.Consistently(func(g Gomega) metav1.Time { return s.get(g).Status.LastOperation.LastUpdateTime }).
		WithTimeout(5 * time.Second).Should(Equal(failedAt))

	// Allowed once: the replacement happens and the permission is used up.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		metav1.SetMetaDataAnnotation(&i.ObjectMeta, kinds.AnnotationAllowDestroy, "true")
	})
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
		g.Expect(providerStatusField(g, current, "network")).To(Equal("10.1.0.0/16"))
		g.Expect(condition(current, kinds.ConditionLastPlan).Message).To(ContainSubstring("1 to replace (terraform_data.network)"))
		g.Expect(current.Annotations).NotTo(HaveKey(kinds.AnnotationAllowDestroy))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return eventReasons(g, s.namespace, s.infra.Name) }).
		WithTimeout(30*time.Second).Should(ContainElement(kinds.ReasonDeprecatedAllowDestroy), "true is deprecated, and an event says so")

	// Another replacement needs another permission.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = guardedConfig("10.2.0.0/16", "b") })
	infra = s.waitFor(t, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateError)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("terraform_data.network (replace)"))

	// Deleting the Infrastructure is not guarded.
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
}

// TestSensitiveOutputsGoToASecretNeverToTheStatus applies a provider with a sensitive
// output: its value is in a Secret the Infrastructure owns, and nowhere in the status.
func TestSensitiveOutputsGoToASecretNeverToTheStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const token = "token-that-must-stay-secret"
	digest := sha256.Sum256([]byte(token))
	value := hex.EncodeToString(digest[:])
	s := newGuardedShoot(t, token)
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, s.infra.Name+".infra.outputs"), secret)).To(Succeed())
	g.Expect(secret.Data).To(HaveKeyWithValue("token_digest", []byte(value)))
	g.Expect(secret.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Infrastructure"), HaveField("Name", s.infra.Name), HaveField("UID", infra.UID))))

	status := infra.Status.DeepCopy()
	status.State = nil // the state itself, gzipped, is the one place terraform keeps it
	encoded, err := json.Marshal(status)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(encoded)).NotTo(ContainSubstring(value))
	g.Expect(string(encoded)).NotTo(ContainSubstring("token_digest"))

	// The state holds every value, sensitive ones included, as terraform keeps them: in the
	// state ConfigMap and, for Gardener's backup of the shoot's state, in .status.state
	// (docs/operating.md says who reads them there).
	stored, err := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(stored)).To(ContainSubstring(value))
	g.Expect(infra.Status.State).NotTo(BeNil())
	var kept struct{ TerraformState []byte }
	g.Expect(json.Unmarshal(infra.Status.State.Raw, &kept)).To(Succeed())
	reader, err := gzip.NewReader(bytes.NewReader(kept.TerraformState))
	g.Expect(err).NotTo(HaveOccurred())
	inStatus, err := io.ReadAll(reader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(inStatus)).To(ContainSubstring(value))

	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(client.IgnoreNotFound(env.Client.Get(ctx, keyOf(s.namespace, s.infra.Name+".infra.outputs"), &corev1.Secret{}))).To(Succeed())
	err = env.Client.Get(ctx, keyOf(s.namespace, s.infra.Name+".infra.outputs"), &corev1.Secret{})
	g.Expect(err).To(HaveOccurred(), "the Secret goes with the Infrastructure")
}

// TestProgressRisesInTheStatusDuringASlowApply watches lastOperation while a slow apply
// runs: its progress and description follow the changes terraform makes.
func TestProgressRisesInTheStatusDuringASlowApply(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t)
	s.infra.Spec.Type = "slow"
	s.infra.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"steps":6,"seconds":2}`)}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "cloudprovider"}, Data: map[string][]byte{"token": []byte("t")}}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) {
		// One step after the other: twelve seconds.
		a.Executor.(*executor.LocalExecutor).Settings.Parallelism = 1
		a.Executor.(*executor.LocalExecutor).Settings.ProgressInterval = 300 * time.Millisecond
	})
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())

	var progress []int32
	var descriptions []string
	g.Eventually(func(g Gomega) {
		last := s.get(g).Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		if last.State == extensionsv1alpha1.LastOperationStateProcessing && !slices.Contains(descriptions, last.Description) {
			progress = append(progress, last.Progress)
			descriptions = append(descriptions, last.Description)
		}
		g.Expect(last.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
	}).WithTimeout(3 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	t.Logf("progress seen: %v %q", progress, descriptions)
	g.Expect(descriptions).To(ContainElement(MatchRegexp(`^applying [1-5]/6: creating terraform_data\.step\[\d\] \(\d+s into the run\)$`)))
	g.Expect(slices.IsSorted(progress)).To(BeTrue(), "progress never falls: %v", progress)
	g.Expect(len(slices.Compact(slices.Clone(progress)))).To(BeNumerically(">=", 3), "progress rose during the apply: %v", progress)
	g.Expect(s.get(g).Status.LastOperation.Progress).To(BeEquivalentTo(100))
}

// TestDriftShowsInTheCondition changes by hand an object the local provider created: the
// next periodic plan says so in InfrastructureInSync, naming it, and applies nothing.
func TestDriftShowsInTheCondition(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const period = 5 * time.Second
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) { a.DriftInterval = period })
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(condition(infra, kinds.ConditionInSync)).To(HaveField("Status", extensionsv1alpha1.ConditionTrue))
	applied := infra.Status.LastOperation.LastUpdateTime

	// A periodic plan finds nothing to do.
	g.Eventually(func(g Gomega) {
		c := condition(s.get(g), kinds.ConditionInSync)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(kinds.ReasonInSync))
		g.Expect(c.Status).To(Equal(extensionsv1alpha1.ConditionTrue))
	}).WithTimeout(period + time.Minute).Should(Succeed())

	// By hand: the zone's policy admits another network.
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, policy)).To(Succeed())
	policy.Spec.Ingress[0].From[0].IPBlock.CIDR = "192.168.0.0/24"
	g.Expect(env.Client.Update(ctx, policy)).To(Succeed())
	changed := time.Now()

	var c *extensionsv1alpha1.Condition
	g.Eventually(func(g Gomega) {
		c = condition(s.get(g), kinds.ConditionInSync)
		g.Expect(c.Status).To(Equal(extensionsv1alpha1.ConditionFalse))
	}).WithTimeout(period + time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	t.Logf("drift seen after %s: %s", time.Since(changed).Round(100*time.Millisecond), c.Message)
	g.Expect(c.Reason).To(Equal(kinds.ReasonDrifted))
	g.Expect(c.Message).To(ContainSubstring("kubectl_manifest.zone_0"))

	// Nothing was applied because of it.
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, policy)).To(Succeed())
	g.Expect(policy.Spec.Ingress[0].From[0].IPBlock.CIDR).To(Equal("192.168.0.0/24"))
	g.Expect(s.get(g).Status.LastOperation.LastUpdateTime).To(Equal(applied))
}
