package templates

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
)

// TestDNSAccountBudgetKeysNeedTheProcesssKey: the budget key of the same credentials
// depends on the key the process drew, a random one: without it, no one can try
// credentials' values against a budget key seen in the metrics.
func TestDNSAccountBudgetKeysNeedTheProcesssKey(t *testing.T) {
	g := NewWithT(t)
	drawn := budgetKey()
	g.Expect(drawn).To(HaveLen(32))
	g.Expect(drawn).NotTo(Equal(make([]byte, 32)))
	g.Expect(budgetKey()).To(Equal(drawn), "one key for the process's life")

	p := &Provider{Manifest: Manifest{Type: "aws", Account: &accountManifest{}}}
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}
	withDrawn := p.AccountKey(env, nil)
	saved := budgetKey
	t.Cleanup(func() { budgetKey = saved })
	budgetKey = func() []byte { return bytes.Repeat([]byte{1}, 32) }
	withOther := p.AccountKey(env, nil)
	g.Expect(withOther).To(MatchRegexp(`^[0-9a-f]{12}$`))
	g.Expect(withOther).NotTo(Equal(withDrawn))
}

// BenchmarkDNSAccountKey is the cost of a run's budget key, paid once per run request.
func BenchmarkDNSAccountKey(b *testing.B) {
	p := &Provider{Manifest: Manifest{Type: "aws", Account: &accountManifest{}}}
	env := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "TF_VAR_endpoint": ""}
	for b.Loop() {
		p.AccountKey(env, nil)
	}
}
