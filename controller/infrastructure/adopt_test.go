package infrastructure_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/infrastructure"
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

	s.infra.Annotations = map[string]string{infrastructure.AnnotationImport: importAnnotation(g, map[string]string{
		"kubectl_manifest.namespace":      "v1//Namespace//" + target,
		"kubectl_manifest.deny_all":       "networking.k8s.io/v1//NetworkPolicy//deny-all//" + target,
		"kubectl_manifest.zone_0":         "networking.k8s.io/v1//NetworkPolicy//zone-0//" + target,
		"kubectl_manifest.ssh_public_key": "v1//Secret//ssh-publickey//" + target,
	})}
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	g.Expect(condition(infra, infrastructure.ConditionLastPlan).Message).To(And(appliedPlan("0 to add, 4 to change"), ContainSubstring("4 to import")))
	g.Expect(s.liveUIDs(g)).To(Equal(uids), "the objects are the ones made by hand")
	g.Expect(s.stateAddresses(g)).To(HaveLen(localResources))
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, keyOf(target, "deny-all"), policy)).To(Succeed())
	g.Expect(policy.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress), "the configuration is applied to them")
	g.Eventually(func(g Gomega) {
		g.Expect(s.get(g).Annotations).NotTo(HaveKey(infrastructure.AnnotationImport), "the annotation is used up")
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
	s.infra.Annotations = map[string]string{infrastructure.AnnotationImport: importAnnotation(g, map[string]string{"terraform_data.network": "existing"})}
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("terraform_data.network (replace)"))
	g.Expect(condition(infra, infrastructure.ConditionLastPlan).Reason).To(Equal(infrastructure.ReasonDestroyProtected))
	g.Expect(infra.Annotations).To(HaveKey(infrastructure.AnnotationImport), "nothing was imported")
}

// An annotation that is not a map of addresses to IDs is refused, naming it.
func TestAdoptionRefusesAnInvalidAnnotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newGuardedShoot(t, "token-1")
	s.infra.Annotations = map[string]string{infrastructure.AnnotationImport: `{"terraform_data.network\n}": "x"}`}
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(infra.Status.LastError.Description).To(And(
		ContainSubstring("metadata.annotations[terraseed.gardener.cloud/import]"), ContainSubstring("not a resource instance address")))
}
