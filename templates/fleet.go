package templates

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
)

// checkAccount: an account is named by keys the provider declares as credentials.
func (m *Manifest) checkAccount() error {
	if m.Account == nil {
		return nil
	}
	if len(m.Account.Credentials) == 0 {
		return fmt.Errorf("account.credentials: name at least one key of credentials that identifies the account")
	}
	for i, key := range m.Account.Credentials {
		declared := func(c Credential) bool { return c.name() == key }
		if !slices.ContainsFunc(m.Credentials, declared) && (m.WorkloadIdentity == nil || !slices.ContainsFunc(m.WorkloadIdentity.Credentials, declared)) {
			return fmt.Errorf("account.credentials[%d]: %q is not a key declared in credentials or workloadIdentity.credentials (a key, or key.field for a field)", i, key)
		}
		if slices.Index(m.Account.Credentials, key) < i {
			return fmt.Errorf("account.credentials[%d]: %q is named twice", i, key)
		}
	}
	return nil
}

// checkThrottling compiles the provider's throttling patterns.
func (m *Manifest) checkThrottling() ([]*regexp.Regexp, error) {
	patterns := make([]*regexp.Regexp, 0, len(m.Throttling))
	for i, p := range m.Throttling {
		if p == "" {
			return nil, fmt.Errorf("throttling[%d]: an empty pattern matches every error", i)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("throttling[%d]: %q is not a regular expression: %w", i, p, err)
		}
		patterns = append(patterns, re)
	}
	return patterns, nil
}

func (m *Manifest) checkParallelism() error {
	if m.Parallelism != nil && (*m.Parallelism < 1 || *m.Parallelism > maxParallelism) {
		return fmt.Errorf("parallelism: %d must be between 1 and %d", *m.Parallelism, maxParallelism)
	}
	return nil
}

// AccountKey is the budget key of the runs that share a cloud account's API rate
// (run.Request's Budget): a short hash of the provider's type, the credentials keys its
// provider.yaml declares to identify the account, the region, and tenant, who holds the
// credentials: the Gardener project of the credentials Secret's namespace, which the
// shoot's owner cannot choose. The values of those keys are not part of it: the owner
// writes them in their own Secret, and with another value (another access key ID of the
// same account, or someone else's) their runs would escape their budget or spend another
// tenant's. Empty when the provider declares no account: its runs have no budget.
func (p *Provider) AccountKey(region, tenant string) string {
	if p.Manifest.Account == nil {
		return ""
	}
	h := sha256.New()
	for _, v := range append([]string{p.Manifest.Type, region, tenant}, p.Manifest.Account.Credentials...) {
		fmt.Fprintf(h, "%d\x00%s\x00", len(v), v)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Throttled says whether one of terraform's error blocks matches the provider's
// throttling patterns.
func (p *Provider) Throttled(blocks []string) bool {
	for _, block := range blocks {
		for _, re := range p.throttling {
			if re.MatchString(block) {
				return true
			}
		}
	}
	return false
}

// Parallelism is terraform's -parallelism for the provider's runs; 0 when it sets none.
func (p *Provider) Parallelism() int {
	if p.Manifest.Parallelism == nil {
		return 0
	}
	return *p.Manifest.Parallelism
}
