package main

import (
	"bytes"
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// Every bad use of the state commands is refused before the seed is reached, naming
// what is wrong.
func TestStateCommandsNameTheirBadArguments(t *testing.T) {
	g := NewWithT(t)
	for args, problem := range map[string][]string{
		"usage: terraseed state":                            {"rewind", "ns/name"},
		"NAMESPACE/NAME: kind Infrastructure is namespaced": {"history", "name-only"},
		"NAMESPACE/NAME: \"/name\" names no object":         {"history", "/name"},
		"SERIAL": {"rollback", "ns/name", "latest"},
		"--kind: \"bucket\" is not a kind served":      {"history", "--kind", "bucket", "ns/name"},
		"NAME: kind BackupEntry is cluster-scoped":     {"history", "--kind", "backupentry", "--runs-namespace", "terraseed", "ns/name"},
		"--runs-namespace":                             {"history", "--kind", "backupbucket", "name"},
		"NAMESPACE/NAME: kind DNSRecord":               {"rollback", "--kind", "dnsrecord", "name", "3"},
		"NAMESPACE/NAME: kind SelfHostedShootExposure": {"history", "--kind", "selfhostedshootexposure", "name"},
	} {
		err := runState(context.Background(), problem, &bytes.Buffer{})
		g.Expect(err).To(MatchError(ContainSubstring(args)), "%v", problem)
	}
	g.Expect(runState(context.Background(), []string{"rollback", "ns/name"}, &bytes.Buffer{})).To(MatchError(ContainSubstring("usage")))
}
