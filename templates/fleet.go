package templates

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// checkAccount: the keys an older provider.yaml names in account.credentials must be
// declared, although the budget key no longer reads them (AccountKey digests them all).
func (m *Manifest) checkAccount() error {
	if m.Account == nil {
		return nil
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

// budgetKey keys the digests of credentials that name the run budgets (AccountKey): drawn
// at random once per process, at its first use, and kept in its memory only. The budgets themselves live in the
// scheduler's memory and start empty at every start, so a key that outlived the process
// would keep nothing but the budgets' metric labels; none can read it, and without it no
// one can tell from a budget key which credentials it stands for, nor try values against it.
var budgetKey = sync.OnceValue(func() []byte {
	key := make([]byte, sha256.Size)
	_, _ = rand.Read(key) // never fails: it crashes the process instead
	return key
})

// AccountKey is the budget key of a run (run.Request's Budget): the runs of one set of
// credentials share a cloud account's API rate, whatever project, kind or region they
// serve, as Gardener's own extensions rate their clients by credentials. It is a keyed
// digest (HMAC-SHA-256 with a key only this process holds) of the provider's type and of
// the whole credentials: env, every value the provider declares for the Secret
// (Credentials), and files, the content of each file credential (CredentialFiles), both
// by the name terraform reads them by. So the runs of two projects that are given one
// Secret (gardenlet gives every shoot's DNSRecords the seed's DNS credentials) share one
// budget, and no tenant can join another's: sharing it takes the other's secret key,
// not only its access key ID. A file credential is a workload identity's token, which
// gardenlet renews: it counts by the identity it was issued to (its issuer and subject,
// which the token's issuer writes and the tenant cannot), not its bytes, so that the
// budget outlives a renewal; a token that is no JWT counts by its bytes. Empty when the
// provider declares no account: its runs have no budget. The values never leave the
// digest: the key is 12 hex digits.
func (p *Provider) AccountKey(env map[string]string, files map[string][]byte) string {
	if p.Manifest.Account == nil {
		return ""
	}
	h := hmac.New(sha256.New, budgetKey())
	write := func(parts ...string) {
		for _, v := range parts {
			fmt.Fprintf(h, "%d\x00%s\x00", len(v), v)
		}
	}
	write("type", p.Manifest.Type)
	for _, name := range slices.Sorted(maps.Keys(env)) {
		write("env", name, env[name])
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		write("file", name, tokenIdentity(files[name]))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// tokenIdentity is what a token stands for: the issuer and subject of a JWT (not
// verified: the Secret holds what its issuer wrote, and the digest only needs to tell
// identities apart), else the token itself.
func tokenIdentity(token []byte) string {
	claims := jwt.RegisteredClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(string(token), &claims); err != nil || claims.Subject == "" {
		return "raw\x00" + string(token)
	}
	return "jwt\x00" + claims.Issuer + "\x00" + claims.Subject
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
