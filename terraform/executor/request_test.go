package executor

import (
	"context"
	"io"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

func TestInvalidRequestsNameTheField(t *testing.T) {
	g := NewWithT(t)
	e := &LocalExecutor{Client: env.Client}
	for field, req := range map[string]run.Request{
		"namespace": {ID: run.ID{Name: "a", Purpose: run.PurposeInfra}, Command: run.Apply},
		"name":      {ID: run.ID{Namespace: "a", Purpose: run.PurposeInfra}, Command: run.Apply},
		"purpose":   {ID: run.ID{Namespace: "a", Name: "a"}, Command: run.Apply},
		"command":   {ID: run.ID{Namespace: "a", Name: "a", Purpose: run.PurposeInfra}, Command: "refresh"},
		"env":       {ID: run.ID{Namespace: "a", Name: "a", Purpose: run.PurposeInfra}, Command: run.Apply, Env: map[string]string{"NOT A NAME": "x"}},
	} {
		_, err := e.Run(context.Background(), req)
		g.Expect(err).To(MatchError(run.ErrInvalidInput))
		g.Expect(err.Error()).To(HavePrefix(field))
	}
}

// A request's parallelism replaces the executor's, and a background request lowers its
// run's priority: what the Runner then does with them, its own tests show.
func TestARequestsParallelismAndBackgroundReachItsRunner(t *testing.T) {
	g := NewWithT(t)
	e := &LocalExecutor{Client: env.Client, Settings: terraformer.Settings{Parallelism: 10}}
	req := run.Request{ID: run.ID{Namespace: "ns", Name: "a", Purpose: run.PurposeInfra}, Command: run.Apply, Parallelism: 1, Background: true}
	r := e.runner(req, t.TempDir(), t.TempDir(), io.Discard)
	g.Expect(r.Settings.Parallelism).To(Equal(1))
	g.Expect(r.Nice).To(Equal(backgroundNice))

	req.Parallelism, req.Background = 0, false
	r = e.runner(req, t.TempDir(), t.TempDir(), io.Discard)
	g.Expect(r.Settings.Parallelism).To(Equal(10), "the executor's")
	g.Expect(r.Nice).To(BeZero())

	req.Parallelism = -1
	g.Expect(req.Validate()).To(MatchError(ContainSubstring("parallelism")))
}
