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

func TestThrottlingOfEveryCloudIsARetryableRateLimit(t *testing.T) {
	g := NewWithT(t)
	for _, block := range []string{
		"creating EC2 VPC: operation error EC2: CreateVpc, https response error StatusCode: 503, RequestID: x, api error RequestLimitExceeded: Request limit exceeded.",
		"reading IAM Role: Throttling: Rate exceeded",
		"googleapi: Error 429: TooManyRequests",
		"unexpected response: HTTP 429 Too Many Requests",
		"request failed: status code: 429",
	} {
		g.Expect(Throttled([]string{block})).To(BeTrue(), block)
		g.Expect(Retryable(Classify([]string{block}))).To(BeTrue(), block)
	}
	for _, block := range []string{
		"creating subnet subnet-4290: InvalidParameterValue",
		"listening on :4290: address in use",
	} {
		g.Expect(Throttled([]string{block})).To(BeFalse(), block)
	}
}
