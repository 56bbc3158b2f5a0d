package errorcodes

import (
	"testing"

	. "github.com/onsi/gomega"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

func TestAnUnauthorizedAPIServerIsUnauthenticatedAndUnauthorized(t *testing.T) {
	g := NewWithT(t)
	// The kubectl provider's block for a client certificate the cluster does not know.
	blocks := []string{"failed to create kubernetes rest client for update of resource: Unauthorized: object item-<id> failed"}
	codes := Classify(blocks)
	g.Expect(codes).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraUnauthenticated, extensionsv1alpha1.ErrorInfraUnauthorized}))
	g.Expect(Retryable(codes)).To(BeFalse())
}

func TestTerraformConfigurationErrorsAreNotReadAsCloudErrors(t *testing.T) {
	g := NewWithT(t)
	// "Invalid character" would match Gardener's unauthenticated pattern.
	g.Expect(Classify([]string{"Invalid character: This character is not used within the language."})).
		To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
	g.Expect(Retryable([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorInfraRateLimitsExceeded})).To(BeTrue())
	g.Expect(Retryable([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem})).To(BeFalse())
}

func TestWhatNoPatternMatchesHasNoCodeAndIsRetried(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Classify(nil)).To(BeEmpty())
	g.Expect(Classify([]string{"interrupted; the state was saved"})).To(BeEmpty())
	g.Expect(Retryable(nil)).To(BeTrue())
}
