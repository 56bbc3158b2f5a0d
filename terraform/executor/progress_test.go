package executor

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
)

// progressLog collects the progress a run reports.
type progressLog struct {
	mu   sync.Mutex
	seen []run.Progress
}

func (l *progressLog) add(p run.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, p)
}

func (l *progressLog) all() []run.Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

func (l *progressLog) last(g Gomega) run.Progress {
	all := l.all()
	g.Expect(all).NotTo(BeEmpty(), "no progress reported yet")
	return all[len(all)-1]
}

// TestProgressRisesDuringASlowApply holds an apply at two gates and watches its
// progress, as the controller would receive it, rise from one to the next, through
// both executors: the run writes it on its configuration ConfigMap, the executor reads it.
func TestProgressRisesDuringASlowApply(t *testing.T) {
	for _, name := range []string{"local", "pod"} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			const resources = 6
			f := newFixture(t, resources)
			gates := []*tftest.Gate{f.NewGate(2), f.NewGate(4)}
			f.WriteChainConfig(resources, gates...)
			// Every pair is two creates, every gate one.
			const total = 2*resources + 2

			var exec Executor = f.executor
			f.executor.Settings.ProgressInterval = 200 * time.Millisecond
			if name == "pod" {
				startKubelet(f, false)
				pe := f.podExecutor()
				pe.Settings.ProgressInterval = 200 * time.Millisecond
				exec = pe
			}
			log := &progressLog{}
			req := f.request(run.Apply)
			req.Progress = log.add
			type outcome struct {
				result *run.Result
				err    error
			}
			done := make(chan outcome, 1)
			go func() {
				result, err := exec.Run(context.Background(), req)
				done <- outcome{result, err}
			}()

			var atGate []int
			for _, gate := range gates {
				gate.WaitUntilReached()
				g.Eventually(func(g Gomega) {
					p := log.last(g)
					g.Expect(p.Phase).To(Equal("applying"))
					g.Expect(p.Total).To(Equal(total))
					g.Expect(p.Done).To(BeNumerically(">=", 2*gate.Index), "every pair before the gate is created")
					g.Expect(p.Done).To(BeNumerically("<", total))
					// The gate's create under way: a report between two changes names none.
					g.Expect(p.Description()).To(MatchRegexp(`^applying \d+/14: .* \(\d+s into the run\)$`), "how far, and when in the run")
				}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
				p := log.last(g)
				t.Logf("at the gate before pair %d: %s (%d%%)", gate.Index, p.Description(), p.Percent())
				atGate = append(atGate, p.Done)
				gate.Open()
			}
			g.Expect(atGate[1]).To(BeNumerically(">", atGate[0]), "the progress rose between the gates")

			var o outcome
			g.Eventually(done).WithTimeout(2 * time.Minute).Should(Receive(&o))
			g.Expect(o.err).NotTo(HaveOccurred())
			g.Expect(o.result.Plan).NotTo(BeNil())
			g.Expect(o.result.Plan.Addresses("create")).To(HaveLen(total))
			g.Expect(o.result.Plan.Addresses("create")).To(ContainElements("terraform_data.gate_2", "kubectl_manifest.item_5"))

			seen := log.all()
			for i := 1; i < len(seen); i++ {
				g.Expect(seen[i].Done).To(BeNumerically(">=", seen[i-1].Done), "progress never falls: %v", seen)
			}
			g.Expect(seen[0].Phase).To(Or(Equal("planning"), Equal("applying")))
		})
	}
}

// What a run reports after its deadline, while it is being stopped, is not what it was
// doing at the deadline: terraform counts the change it was stopped in as done. The
// progress followed up to the deadline is the one the run's error names.
func TestTheProgressAtTheDeadlineIsTheLastOneReportedBeforeIt(t *testing.T) {
	g := NewWithT(t)
	transport := report.File(filepath.Join(t.TempDir(), "report"))
	atDeadline := run.Progress{Command: string(run.Apply), Phase: "applying", Done: 1, Total: 2, Current: "creating terraform_data.slow", Creating: []string{"terraform_data.slow"}}
	g.Expect(transport.Write(t.Context(), report.Report{Progress: &atDeadline})).To(Succeed())

	log := &progressLog{}
	req := run.Request{Command: run.Apply, Progress: log.add}
	const timeout = 500 * time.Millisecond
	stop := followProgress(t.Context(), transport, req, time.Now(), 20*time.Millisecond, timeout)
	g.Eventually(log.all).Should(HaveLen(1))
	time.Sleep(timeout)
	whileStopped := run.Progress{Command: string(run.Apply), Phase: "applying", Done: 2, Total: 2}
	g.Expect(transport.Write(t.Context(), report.Report{Progress: &whileStopped})).To(Succeed())
	g.Consistently(log.all, 200*time.Millisecond, 20*time.Millisecond).Should(HaveLen(1), "nothing is read past the deadline")

	last := stop()
	g.Expect(last).NotTo(BeNil())
	g.Expect(last.Description()).To(Equal("applying 1/2: creating terraform_data.slow"))
}
