package kinds_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
)

var planDigest = regexp.MustCompile(`plan (sha256:[0-9a-f]{16}): to allow exactly this plan once`)

// refusedPlan waits for the destroy guard to refuse a plan, and returns the digest the
// LastPlan condition names.
func refusedPlan(t *testing.T, s *shoot, other string) (string, *extensionsv1alpha1.Infrastructure) {
	t.Helper()
	var digest string
	var infra *extensionsv1alpha1.Infrastructure
	NewWithT(t).Eventually(func(g Gomega) {
		infra = s.get(g)
		g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateError))
		plan := condition(infra, kinds.ConditionLastPlan)
		g.Expect(plan.Reason).To(Equal(kinds.ReasonDestroyProtected))
		m := planDigest.FindStringSubmatch(plan.Message)
		g.Expect(m).To(HaveLen(2), plan.Message)
		g.Expect(m[1]).NotTo(Equal(other))
		digest = m[1]
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	return digest, infra
}

// TestAnAllowDestroyDigestAppliesExactlyThePlanItNames: the LastPlan condition of a
// refused apply names its plan's digest; the annotation set to another plan's digest, or
// to one whose expiry passed, is refused, saying why; set to this plan's digest, exactly
// this plan is applied and the annotation is used up.
func TestAnAllowDestroyDigestAppliesExactlyThePlanItNames(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newGuardedShoot(t, "token-1")
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	// A replacement of the protected network: refused, with its plan's digest.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = guardedConfig("10.1.0.0/16", "a") })
	first, _ := refusedPlan(t, s, "")

	// The configuration changes before the permission comes: the plan it allows is not
	// the one the next apply makes, which is refused again, saying why.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"network":"10.1.0.0/16","label":"a","extra":true}`)}
		metav1.SetMetaDataAnnotation(&i.ObjectMeta, kinds.AnnotationAllowDestroy, first)
	})
	second, infra := refusedPlan(t, s, first)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring(fmt.Sprintf("the plan allowed was %s, this plan is %s", first, second)))
	g.Expect(providerStatusField(g, infra, "network")).To(Equal("10.0.0.0/16"), "nothing was changed")

	// A permission for this plan whose expiry passed allows nothing, and says so.
	expired := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		metav1.SetMetaDataAnnotation(&i.ObjectMeta, kinds.AnnotationAllowDestroy, second+",expires="+expired)
	})
	g.Eventually(func(g Gomega) {
		plan := condition(s.get(g), kinds.ConditionLastPlan)
		g.Expect(plan.Message).To(ContainSubstring(fmt.Sprintf("the permission for plan %s expired at %s", second, expired)))
	}).WithTimeout(3 * time.Minute).Should(Succeed())

	// A value that is neither names the annotation.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		metav1.SetMetaDataAnnotation(&i.ObjectMeta, kinds.AnnotationAllowDestroy, "yes please")
	})
	g.Eventually(func(g Gomega) {
		last := s.get(g).Status.LastError
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Description).To(ContainSubstring(fmt.Sprintf("metadata.annotations[%s]", kinds.AnnotationAllowDestroy)))
	}).WithTimeout(time.Minute).Should(Succeed())

	// This plan's digest, with an expiry ahead: exactly this plan is applied.
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		metav1.SetMetaDataAnnotation(&i.ObjectMeta, kinds.AnnotationAllowDestroy, second+",expires="+until)
	})
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
		g.Expect(providerStatusField(g, current, "network")).To(Equal("10.1.0.0/16"))
		g.Expect(condition(current, kinds.ConditionLastPlan).Message).To(Equal(
			fmt.Sprintf("applied plan %s: 1 to add (terraform_data.extra), 0 to change, 1 to replace (terraform_data.network), 0 to destroy", second)))
		g.Expect(current.Annotations).NotTo(HaveKey(kinds.AnnotationAllowDestroy), "used up")
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Expect(eventReasons(g, s.namespace, s.infra.Name)).NotTo(ContainElement(kinds.ReasonDeprecatedAllowDestroy))

	// The next replacement is refused again.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) {
		i.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"network":"10.2.0.0/16","label":"a","extra":true}`)}
	})
	refusedPlan(t, s, second)
}
