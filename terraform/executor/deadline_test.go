package executor

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
)

// A local run that outlives the run timeout is stopped as a shutdown stops it: terraform
// is interrupted, what it created is saved, the run fails naming the deadline and what it
// was doing then, and its working directory is free for the next run.
func TestALocalRunOverItsTimeoutIsStoppedWithItsStateSaved(t *testing.T) {
	g := NewWithT(t)
	f, gate := heldApply(t)
	// Long enough for init and plan to reach the gate on a loaded machine; the progress
	// read often enough that the last one read before the deadline is the gate's.
	f.executor.RunTimeout = 8 * time.Second
	f.executor.Settings.StopTimeout = time.Minute
	f.executor.Settings.ProgressInterval = 100 * time.Millisecond

	started := time.Now()
	req := f.request(run.Apply)
	req.Progress = func(run.Progress) {}
	_, err := f.executor.Run(t.Context(), req)
	g.Expect(err).To(MatchError(ErrRunDeadline))
	var runErr *run.Error
	g.Expect(errors.As(err, &runErr)).To(BeTrue())
	g.Expect(runErr.Message).To(ContainSubstring("running for more than 8s"))
	// Gardener's wait shows the message when it gives up: it says how far the apply got.
	g.Expect(runErr.Message).To(MatchRegexp(`; when stopped it was applying \d+/\d+: creating \S+`))
	g.Expect(time.Since(started)).To(BeNumerically("<", time.Minute), "the gate holds the run forever: only the timeout ended it")
	created, listed := f.ExpectNoLostStateEntry(g)
	g.Expect(created).To(Equal(2), "the run got to its gate")
	g.Expect(listed).To(BeNumerically(">=", 1))
	active, err := f.executor.Active(t.Context(), f.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeFalse(), "the stopped run holds its directory no more")

	gate.Open()
	f.executor.RunTimeout = 0
	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.ExpectEachItemOnceInState(g, 2)
}
