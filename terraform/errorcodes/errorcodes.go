package errorcodes

import (
	"regexp"
	"slices"
	"strings"
	"sync"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// nonRetryable are the codes that need a change of input or of the account to clear.
var nonRetryable = []extensionsv1alpha1.ErrorCode{
	extensionsv1alpha1.ErrorInfraUnauthenticated,
	extensionsv1alpha1.ErrorInfraUnauthorized,
	extensionsv1alpha1.ErrorInfraQuotaExceeded,
	extensionsv1alpha1.ErrorInfraDependencies,
	extensionsv1alpha1.ErrorConfigurationProblem,
}

// Retryable says whether a failure of these codes may clear by itself, so that retrying
// it without a change of input can help.
func Retryable(codes []extensionsv1alpha1.ErrorCode) bool {
	for _, c := range codes {
		if slices.Contains(nonRetryable, c) {
			return false
		}
	}
	return true
}

type pattern struct {
	code extensionsv1alpha1.ErrorCode
	re   *regexp.Regexp
}

// terraformConfigErrors are the summaries terraform gives a configuration that can never
// apply; they decide a block alone, because their details quote user text that the
// cloud patterns below would misread.
var terraformConfigErrors = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(Argument or block definition required|Unsupported (argument|block type|attribute|operator)|Invalid (expression|reference|block definition|character|multi-line string|function argument|value for input variable|value for variable|resource type|provider configuration|variable type|default value for variable|index|template interpolation value)|Unclosed configuration block|Missing (required argument|newline after argument|item separator|key/value separator|name for resource)|Reference to undeclared .*|No value for required variable|Duplicate (resource|variable|provider|output|module call) .*|Incorrect attribute value type|Failed to query available provider packages|Failed to install provider|Inconsistent dependency lock file|Unsupported Terraform Core version|Variables not allowed|Error in function call|Extra characters after .*|Unterminated template string|Call to unknown function|Unreadable module directory|Module not installed|Missing required provider|Invalid provider registry host)`)
})

// patterns follow Gardener's classification of cloud error texts
// (gardener/gardener pkg/apis/core/v1beta1/helper), extended by the texts
// Kubernetes API servers return to the kubectl provider. These and the ones above compile
// on first use: most runs succeed and never classify.
var patterns = sync.OnceValue(func() []pattern {
	return []pattern{
		{extensionsv1alpha1.ErrorInfraUnauthenticated, regexp.MustCompile(`(?i)(InvalidAuthenticationTokenTenant|Authentication failed|AuthFailure|invalid character|invalid_client|query returned no results|InvalidAccessKeyId|cannot fetch token|InvalidSecretAccessKey|InvalidSubscriptionId|provide credentials|certificate signed by unknown authority|x509: certificate|tls: failed to verify certificate|: Unauthorized\b)`)},
		{extensionsv1alpha1.ErrorInfraUnauthorized, regexp.MustCompile(`(?i)(Unauthorized|InvalidClientTokenId|SignatureDoesNotMatch|AuthorizationFailed|invalid_grant|Authorization Profile was not found|no active subscriptions|UnauthorizedOperation|not authorized|AccessDenied|OperationNotAllowed|Error 403|SERVICE_ACCOUNT_ACCESS_DENIED|is forbidden: User)`)},
		{extensionsv1alpha1.ErrorInfraQuotaExceeded, regexp.MustCompile(`(?i)((?:^|[^t]|(?:[^s]|^)t|(?:[^e]|^)st|(?:[^u]|^)est|(?:[^q]|^)uest|(?:[^e]|^)quest|(?:[^r]|^)equest)LimitExceeded|Quotas|Quota.*exceeded|exceeded quota|Quota has been met|QUOTA_EXCEEDED|Maximum number of ports exceeded|VolumeSizeExceedsAvailableQuota)`)},
		{extensionsv1alpha1.ErrorInfraRateLimitsExceeded, regexp.MustCompile(`(?i)(RequestLimitExceeded|Throttling|Too many requests|TooManyRequests|(?:status code|StatusCode|HTTP(?:/[0-9.]+)?)[: ]+429\b)`)},
		{extensionsv1alpha1.ErrorInfraDependencies, regexp.MustCompile(`(?i)(PendingVerification|Access Not Configured|accessNotConfigured|DependencyViolation|OptInRequired|DeleteConflict|Conflict|inactive billing state|is already being used|InUseSubnetCannotBeDeleted|VnetInUse|InUseRouteTableCannotBeDeleted|timeout while waiting for state to become|InvalidCidrBlock|already busy for|InsufficientFreeAddressesInSubnet|InternalServerError|internal server error|A resource with the ID|already exists)`)},
		{extensionsv1alpha1.ErrorRetryableInfraDependencies, regexp.MustCompile(`(?i)(RetryableError|connection refused|i/o timeout|no such host|TLS handshake timeout)`)},
		{extensionsv1alpha1.ErrorInfraResourcesDepleted, regexp.MustCompile(`(?i)(not available in the current hardware cluster|InsufficientInstanceCapacity|SkuNotAvailable|ZonalAllocationFailed|out of stock)`)},
		{extensionsv1alpha1.ErrorConfigurationProblem, regexp.MustCompile(`(?i)(not supported in your requested Availability Zone|InvalidParameter|InvalidParameterValue|notFound|not found|InvalidSubnet|Invalid value|violates constraint|no attached internet gateway found|invalid VPC attributes|strict decoder error|is invalid:)`)},
		{extensionsv1alpha1.ErrorRetryableConfigurationProblem, regexp.MustCompile(`(?i)(is misconfigured and requires zero voluntary evictions|SDK.CanNotResolveEndpoint|The requested configuration is currently not supported)`)},
	}
})

// Throttled says whether one of terraform's error blocks says the cloud throttled its
// calls (Gardener's rate-limit code, which is retried).
func Throttled(blocks []string) bool {
	return slices.Contains(Classify(blocks), extensionsv1alpha1.ErrorInfraRateLimitsExceeded)
}

// Classify returns the Gardener error codes of terraform's error blocks, each a summary
// and its detail on one line, in a fixed order.
func Classify(blocks []string) []extensionsv1alpha1.ErrorCode {
	found := map[extensionsv1alpha1.ErrorCode]bool{}
	for _, block := range blocks {
		summary, _, _ := strings.Cut(block, ": ")
		if terraformConfigErrors().MatchString(summary) {
			found[extensionsv1alpha1.ErrorConfigurationProblem] = true
			continue
		}
		for _, p := range patterns() {
			if p.re.MatchString(block) {
				found[p.code] = true
			}
		}
	}
	var codes []extensionsv1alpha1.ErrorCode
	for _, p := range patterns() {
		if found[p.code] {
			codes = append(codes, p.code)
			delete(found, p.code)
		}
	}
	return codes
}
