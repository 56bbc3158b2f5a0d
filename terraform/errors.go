package terraform

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

var (
	// ErrRunInProgress is returned when another run of the same Infrastructure has not finished.
	ErrRunInProgress = errors.New("another terraform run of this Infrastructure is in progress")
	// ErrInvalidInput is returned for a request that can never succeed as it is.
	ErrInvalidInput = errors.New("invalid input")
	// ErrTerraformFailed is returned when terraform itself reported an error.
	ErrTerraformFailed = errors.New("terraform failed")
	// ErrCreationDeadline is returned when a run pod did not start in time.
	ErrCreationDeadline = errors.New("the terraform run did not start in time")
	// ErrRunDeadline is returned when a run did not finish in time.
	ErrRunDeadline = errors.New("the terraform run did not finish in time")
	// ErrStateNotSaved is returned when the state could not be written back to the API server.
	ErrStateNotSaved = errors.New("the terraform state could not be saved")
)

// RunError is a failed run, carrying what Gardener needs to decide whether to retry.
type RunError struct {
	// Command is the terraform command that failed.
	Command string
	// Codes classify the failure; empty when no known pattern matched.
	Codes []extensionsv1alpha1.ErrorCode
	// Message is short and readable: terraform's deduplicated error summaries.
	Message string
	// Retryable is false when a retry cannot succeed without a change of input.
	Retryable bool
	// Phases are the terraform commands the run got to, and how long they took.
	Phases Phases

	err error
}

func (e *RunError) Error() string {
	if e.Command == "" {
		return e.Message
	}
	return fmt.Sprintf("terraform %s: %s", e.Command, e.Message)
}

func (e *RunError) Unwrap() error { return e.err }

func invalidInput(field, problem string) error {
	return &RunError{
		Codes:   []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
		Message: fmt.Sprintf("%s: %s", field, problem),
		err:     ErrInvalidInput,
	}
}

// nonRetryable are the codes that need a change of input or of the account to clear.
var nonRetryable = []extensionsv1alpha1.ErrorCode{
	extensionsv1alpha1.ErrorInfraUnauthenticated,
	extensionsv1alpha1.ErrorInfraUnauthorized,
	extensionsv1alpha1.ErrorInfraQuotaExceeded,
	extensionsv1alpha1.ErrorInfraDependencies,
	extensionsv1alpha1.ErrorConfigurationProblem,
}

func retryable(codes []extensionsv1alpha1.ErrorCode) bool {
	for _, c := range codes {
		if slices.Contains(nonRetryable, c) {
			return false
		}
	}
	return true
}

// NewRunError classifies terraform's output of a failed command.
func NewRunError(command, output string, cause error) *RunError {
	blocks := ErrorBlocks(output)
	message := strings.Join(blocks, "; ")
	if message == "" {
		message = lastLine(output)
	}
	if message == "" && cause != nil {
		message = cleanText(cause.Error())
	}
	codes := Classify(blocks)
	if len(blocks) == 0 {
		codes = Classify([]string{message})
	}
	return &RunError{
		Command:   command,
		Codes:     codes,
		Message:   truncate(message, maxMessage),
		Retryable: retryable(codes),
		err:       errors.Join(ErrTerraformFailed, cause),
	}
}

// maxMessage keeps a message short enough for a status field and a termination message.
const maxMessage = 3000

var (
	ansiPattern = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	uuidPattern = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// longNumber matches the random parts of temporary file names, which would keep
	// otherwise equal errors apart.
	longNumber = regexp.MustCompile(`\d{6,}`)
	// sourceLine matches the parts of an error block that point into the configuration
	// rather than say what is wrong.
	sourceLine = regexp.MustCompile(`^\s*(on .* line \d+|with [^ ]+,|\d+: |\(and \d+ more similar\))`)
	spaces     = regexp.MustCompile(`\s+`)
)

func cleanText(s string) string {
	s = ansiPattern.ReplaceAllString(s, "")
	s = uuidPattern.ReplaceAllString(s, "<id>")
	s = longNumber.ReplaceAllString(s, "<n>")
	return strings.TrimSpace(spaces.ReplaceAllString(s, " "))
}

// failurePrefix starts the line with which the terraformer reports a failed run.
const failurePrefix = "terraformer failed: "

// ErrorBlocks returns terraform's `Error:` blocks of output, each as one line of summary
// and detail, without colour codes, source excerpts or UUIDs, each once.
func ErrorBlocks(output string) []string {
	var blocks []string
	var current []string
	inBlock := false
	flush := func() {
		if len(current) > 0 {
			block := truncate(cleanText(strings.Join(current, " ")), 600)
			if !slices.Contains(blocks, block) {
				blocks = append(blocks, block)
			}
		}
		current, inBlock = nil, false
	}
	blankLines := 0
	for _, line := range strings.Split(ansiPattern.ReplaceAllString(output, ""), "\n") {
		line = strings.TrimRight(line, " \r")
		trimmed := strings.TrimLeft(line, "│╷╵ ")
		if line == "" {
			blankLines++
		} else {
			blankLines = 0
		}
		switch {
		case strings.HasPrefix(line, failurePrefix):
			// The terraformer's own last word sums up the blocks before it.
			flush()
		case inBlock && blankLines == 2:
			// Without colour, terraform ends a block with two blank lines; what follows
			// (another tool's output, as in a pod's log) is not part of it.
			flush()
		case strings.HasPrefix(trimmed, "Error: "):
			flush()
			inBlock = true
			current = append(current, strings.TrimPrefix(trimmed, "Error: ")+":")
		case strings.HasPrefix(trimmed, "Warning: "), strings.HasPrefix(line, "╵"):
			flush()
		case inBlock && !sourceLine.MatchString(trimmed) && trimmed != "":
			current = append(current, trimmed)
		}
	}
	flush()
	for i, b := range blocks {
		blocks[i] = strings.TrimSuffix(b, ":")
	}
	return blocks
}

func lastLine(output string) string {
	lines := strings.Split(strings.TrimSpace(output), "\n")
	return cleanText(lines[len(lines)-1])
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
// on first use: most runs succeed and never classify, and every run starts a process.
var patterns = sync.OnceValue(func() []pattern {
	return []pattern{
		{extensionsv1alpha1.ErrorInfraUnauthenticated, regexp.MustCompile(`(?i)(InvalidAuthenticationTokenTenant|Authentication failed|AuthFailure|invalid character|invalid_client|query returned no results|InvalidAccessKeyId|cannot fetch token|InvalidSecretAccessKey|InvalidSubscriptionId|provide credentials|certificate signed by unknown authority|x509: certificate|tls: failed to verify certificate|: Unauthorized\b)`)},
		{extensionsv1alpha1.ErrorInfraUnauthorized, regexp.MustCompile(`(?i)(Unauthorized|InvalidClientTokenId|SignatureDoesNotMatch|AuthorizationFailed|invalid_grant|Authorization Profile was not found|no active subscriptions|UnauthorizedOperation|not authorized|AccessDenied|OperationNotAllowed|Error 403|SERVICE_ACCOUNT_ACCESS_DENIED|is forbidden: User)`)},
		{extensionsv1alpha1.ErrorInfraQuotaExceeded, regexp.MustCompile(`(?i)((?:^|[^t]|(?:[^s]|^)t|(?:[^e]|^)st|(?:[^u]|^)est|(?:[^q]|^)uest|(?:[^e]|^)quest|(?:[^r]|^)equest)LimitExceeded|Quotas|Quota.*exceeded|exceeded quota|Quota has been met|QUOTA_EXCEEDED|Maximum number of ports exceeded|VolumeSizeExceedsAvailableQuota)`)},
		{extensionsv1alpha1.ErrorInfraRateLimitsExceeded, regexp.MustCompile(`(?i)(RequestLimitExceeded|Throttling|Too many requests)`)},
		{extensionsv1alpha1.ErrorInfraDependencies, regexp.MustCompile(`(?i)(PendingVerification|Access Not Configured|accessNotConfigured|DependencyViolation|OptInRequired|DeleteConflict|Conflict|inactive billing state|is already being used|InUseSubnetCannotBeDeleted|VnetInUse|InUseRouteTableCannotBeDeleted|timeout while waiting for state to become|InvalidCidrBlock|already busy for|InsufficientFreeAddressesInSubnet|InternalServerError|internal server error|A resource with the ID|already exists)`)},
		{extensionsv1alpha1.ErrorRetryableInfraDependencies, regexp.MustCompile(`(?i)(RetryableError|connection refused|i/o timeout|no such host|TLS handshake timeout)`)},
		{extensionsv1alpha1.ErrorInfraResourcesDepleted, regexp.MustCompile(`(?i)(not available in the current hardware cluster|InsufficientInstanceCapacity|SkuNotAvailable|ZonalAllocationFailed|out of stock)`)},
		{extensionsv1alpha1.ErrorConfigurationProblem, regexp.MustCompile(`(?i)(not supported in your requested Availability Zone|InvalidParameter|InvalidParameterValue|notFound|not found|InvalidSubnet|Invalid value|violates constraint|no attached internet gateway found|invalid VPC attributes|strict decoder error|is invalid:)`)},
		{extensionsv1alpha1.ErrorRetryableConfigurationProblem, regexp.MustCompile(`(?i)(is misconfigured and requires zero voluntary evictions|SDK.CanNotResolveEndpoint|The requested configuration is currently not supported)`)},
	}
})

// Classify returns the Gardener error codes of terraform's error blocks, in a fixed order.
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
