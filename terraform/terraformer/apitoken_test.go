package terraformer

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A run pod given its API token in its environment reaches the API server's Service with
// it, and terraform, which the terraformer starts later, does not inherit it. A pod that
// started after the time its token allows for runs nothing: the token could expire
// before the run's final save.
func TestARequestedTokenIsTakenFromTheEnvironmentAndRemovedFromIt(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	for _, tc := range []struct {
		name    string
		startBy time.Time
		err     string
	}{
		{name: "in time", startBy: now.Add(time.Minute)},
		{name: "too late", startBy: now.Add(-90 * time.Second), err: "the run pod started too late for its API token (TERRASEED_API_TOKEN_START_BY): it had to start by 2026-11-27T09:58:30Z, and started 1m30s later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv(EnvAPIToken, "the-token")
			t.Setenv(EnvAPICA, "the-ca")
			t.Setenv(EnvAPIStartBy, tc.startBy.Format(time.RFC3339))
			cfg, err := requestedTokenConfig(now)
			for _, name := range []string{EnvAPIToken, EnvAPICA, EnvAPIStartBy} {
				_, set := os.LookupEnv(name)
				g.Expect(set).To(BeFalse(), name)
			}
			if tc.err != "" {
				g.Expect(err).To(MatchError(ErrStartedTooLate))
				g.Expect(err).To(MatchError(tc.err))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.Host).To(Equal("https://10.0.0.1:443"))
			g.Expect(cfg.BearerToken).To(Equal("the-token"))
			g.Expect(cfg.CAData).To(Equal([]byte("the-ca")))
		})
	}
}

// Without a requested token, the pod's mounted one is used (rest.InClusterConfig).
func TestWithoutARequestedTokenTheMountedOneIsUsed(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(EnvAPIToken, "")
	cfg, err := requestedTokenConfig(time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg).To(BeNil())
}
