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
		"usage: terraseed state": {"rewind", "ns/name"},
		"NAMESPACE/NAME":         {"history", "name-only"},
		"SERIAL":                 {"rollback", "ns/name", "latest"},
	} {
		err := runState(context.Background(), problem, &bytes.Buffer{})
		g.Expect(err).To(MatchError(ContainSubstring(args)), "%v", problem)
	}
	g.Expect(runState(context.Background(), []string{"rollback", "ns/name"}, &bytes.Buffer{})).To(MatchError(ContainSubstring("usage")))
}
