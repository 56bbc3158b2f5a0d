package kinds_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
)

// importAnnotation is the adoption annotation for the imports given.
func importAnnotation(g Gomega, imports map[string]string) string {
	raw, err := json.Marshal(imports)
	g.Expect(err).NotTo(HaveOccurred())
	return string(raw)
}

// Objects created outside terraform are adopted: imported by the IDs the annotation
// names, nothing created, the annotation used up, and the next apply finds them in sync.
func TestAdoptionImportsExistingObjectsAndCreatesNone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	target := s.targetNamespace()
	// What an operator made by hand, not quite as the configuration has it.
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "zone-0"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "ssh-publickey"}})).To(Succeed())
	uids := s.liveUIDs(g)

	s.infra.Annotations = map[string]string{kinds.AnnotationImport: importAnnotation(g, map[string]string{
		"kubectl_manifest.namespace":      "v1//Namespace//" + target,
		"kubectl_manifest.deny_all":       "networking.k8s.io/v1//NetworkPolicy//deny-all//" + target,
		"kubectl_manifest.zone_0":         "networking.k8s.io/v1//NetworkPolicy//zone-0//" + target,
		"kubectl_manifest.ssh_public_key": "v1//Secret//ssh-publickey//" + target,
	})}
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(And(appliedPlan("0 to add, 4 to change"), ContainSubstring("4 to import")))
	g.Expect(s.liveUIDs(g)).To(Equal(uids), "the objects are the ones made by hand")
	g.Expect(s.stateAddresses(g)).To(HaveLen(localResources))
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, keyOf(target, "deny-all"), policy)).To(Succeed())
	g.Expect(policy.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress), "the configuration is applied to them")
	g.Eventually(func(g Gomega) {
		g.Expect(s.get(g).Annotations).NotTo(HaveKey(kinds.AnnotationImport), "the annotation is used up")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	assertInSync(t, s)
}

// An adopted resource of a protected type that the plan would replace is not destroyed:
// the apply is refused as for any protected resource.
func TestAdoptionRefusesToReplaceAProtectedResource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newGuardedShoot(t, "token-1")
	// An imported terraform_data holds its ID only: its plan replaces it.
	s.infra.Annotations = map[string]string{kinds.AnnotationImport: importAnnotation(g, map[string]string{"terraform_data.network": "existing"})}
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("terraform_data.network (import, replace)"))
	g.Expect(condition(infra, kinds.ConditionLastPlan).Reason).To(Equal(kinds.ReasonDestroyProtected))
	g.Expect(infra.Annotations).To(HaveKey(kinds.AnnotationImport), "nothing was imported")
}

// An annotation that is not a map of addresses to IDs is refused, naming it.
func TestAdoptionRefusesAnInvalidAnnotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newGuardedShoot(t, "token-1")
	s.infra.Annotations = map[string]string{kinds.AnnotationImport: `{"terraform_data.network\n}": "x"}`}
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(infra.Status.LastError.Description).To(And(
		ContainSubstring("metadata.annotations[terraseed.gardener.cloud/import]"), ContainSubstring("not a resource instance address")))
}

// handMade makes the objects of a one-zone local shoot by hand, as an operator would,
// and returns the import annotation that adopts them.
func handMade(g Gomega, s *shoot) string {
	ctx := context.Background()
	target := s.targetNamespace()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "deny-all"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "zone-0"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "ssh-publickey"}})).To(Succeed())
	return importAnnotation(g, map[string]string{
		"kubectl_manifest.namespace":      "v1//Namespace//" + target,
		"kubectl_manifest.deny_all":       "networking.k8s.io/v1//NetworkPolicy//deny-all//" + target,
		"kubectl_manifest.zone_0":         "networking.k8s.io/v1//NetworkPolicy//zone-0//" + target,
		"kubectl_manifest.ssh_public_key": "v1//Secret//ssh-publickey//" + target,
	})
}

// An import annotation set while the apply waits for a run slot is not used up by that
// run, which was prepared without it: the run is replaced by one that imports, and the
// annotation goes only once that one imported.
func TestAdoptionSetWhileTheApplyWaitsIsImportedByTheNextRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	busy := slowLocalShoot(t, 1, 20)
	s := newShootIn(busy.namespace, "adopting", "10.250.0.0/19")
	startControllerWith(t, busy.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) { a.Pipeline.MaxRuns = 1 })
	g.Expect(env.Client.Create(ctx, busy.infra)).To(Succeed())
	busy.waitForRunStart(t)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		last := s.get(g).Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		return last.Description
	}).WithTimeout(time.Minute).Should(ContainSubstring("waiting for a run slot"))

	adopt := handMade(g, s)
	uids := s.liveUIDs(g)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Annotations = map[string]string{kinds.AnnotationImport: adopt}
	})
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(And(appliedPlan("0 to add, 4 to change"), ContainSubstring("4 to import")))
	g.Expect(s.liveUIDs(g)).To(Equal(uids))
	g.Eventually(func(g Gomega) {
		g.Expect(s.get(g).Annotations).NotTo(HaveKey(kinds.AnnotationImport), "the apply that imported used it up")
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// An import annotation set while an apply is under way is not taken for that apply's: its
// outcome does not end the operation, and the annotation goes only once an apply found
// the state holding what it names under the ID it names.
func TestAdoptionSetWhileAnApplyIsUnderWayOutlivesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowLocalShoot(t, 2, 8)
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitForStep(t, 0)

	step := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.targetNamespace(), Name: "step-1"}}
	g.Expect(env.Client.Create(ctx, step)).To(Succeed())
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Annotations = map[string]string{kinds.AnnotationImport: importAnnotation(g, map[string]string{
			"kubectl_manifest.step_1": "v1//ConfigMap//step-1//" + s.targetNamespace(),
		})}
	})
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	// The apply under way made step-1 its own; the operation ended with the apply after it.
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(appliedPlanExactly("0 to add, 0 to change, 0 to replace, 0 to destroy"))
	g.Eventually(func(g Gomega) {
		g.Expect(s.get(g).Annotations).NotTo(HaveKey(kinds.AnnotationImport))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	after := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.targetNamespace(), "step-1"), after)).To(Succeed())
	g.Expect(after.UID).To(Equal(step.UID))
}

// An adoption of an object another Infrastructure's index holds is refused, naming that
// Infrastructure and the ID: one object is never two shoots', and the adopting apply
// would replace it under the other.
func TestAdoptionRefusesAnIDAnotherInfrastructureHolds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := newShoot(t, "10.250.0.0/19")
	owner.createSecret(t, adminKubeconfig(t))
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startControllerIn(t, []string{owner.namespace, s.namespace}, workDir(t), env.Config, 2, logr.Logger{})
	g.Expect(env.Client.Create(ctx, owner.infra)).To(Succeed())
	owner.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	uids := owner.liveUIDs(g)

	id := "networking.k8s.io/v1//NetworkPolicy//zone-0//" + owner.targetNamespace()
	s.infra.Annotations = map[string]string{kinds.AnnotationImport: importAnnotation(g, map[string]string{"kubectl_manifest.zone_0": id})}
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(infra.Status.LastError.Description).To(And(
		ContainSubstring("metadata.annotations[terraseed.gardener.cloud/import]: kubectl_manifest.zone_0"),
		ContainSubstring(id), ContainSubstring("Infrastructure "+owner.namespace+"/"+owner.infra.Name)))
	g.Expect(owner.liveUIDs(g)).To(Equal(uids), "the other Infrastructure's objects are untouched")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{})).NotTo(Succeed(), "nothing ran")
}

// An adopted object of a type that is not protected, which the plan would replace (its
// name is not the configuration's), is guarded as a protected one: the apply is refused,
// naming it, and goes ahead only with leave for exactly that plan.
func TestAdoptionThatWouldReplaceTheImportedObjectNeedsLeaveForItsPlan(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	target := s.targetNamespace()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}})).To(Succeed())
	stray := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "stray"}}
	g.Expect(env.Client.Create(ctx, stray)).To(Succeed())
	s.infra.Annotations = map[string]string{kinds.AnnotationImport: importAnnotation(g, map[string]string{
		"kubectl_manifest.zone_0": "networking.k8s.io/v1//NetworkPolicy//stray//" + target,
	})}
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	refused := condition(infra, kinds.ConditionLastPlan)
	g.Expect(refused.Reason).To(Equal(kinds.ReasonDestroyProtected))
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("kubectl_manifest.zone_0 (import, replace)"))
	after := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, keyOf(target, "stray"), after)).To(Succeed())
	g.Expect(after.UID).To(Equal(stray.UID), "nothing was replaced")
	g.Expect(infra.Annotations).To(HaveKey(kinds.AnnotationImport))

	digest := regexp.MustCompile(`sha256:[0-9a-f]{16}`).FindString(refused.Message)
	g.Expect(digest).NotTo(BeEmpty())
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Annotations[kinds.AnnotationAllowDestroy] = digest
		i.Annotations[extension.AnnotationOperation] = extension.OperationReconcile
	})
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, keyOf(target, "stray"), &networkingv1.NetworkPolicy{})).NotTo(Succeed(), "the plan allowed replaced it")
		g.Expect(env.Client.Get(ctx, keyOf(target, "zone-0"), &networkingv1.NetworkPolicy{})).To(Succeed())
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}
