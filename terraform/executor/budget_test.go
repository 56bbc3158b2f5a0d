package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/terraseed/terraseed/terraform/run"
)

// The cloud is the boundary these tests cannot run: timedRuns stands for an executor
// whose runs take a while each, and fail as a throttled cloud makes them fail when
// told so. What they test is the scheduler's order, not terraform.
type timedRuns struct {
	duration time.Duration
	// fail, when set, is the error of a run once its time is over.
	fail func(run.Request) error
	// held, when set, holds every run at its start until it is closed: a test submits
	// all it means to while the first runs are under way, however slow the machine.
	held chan struct{}

	mu      sync.Mutex
	running map[string]int
	highest map[string]int
	starts  []run.Request
	ends    []run.Request
}

func newTimedRuns(duration time.Duration) *timedRuns {
	return &timedRuns{duration: duration, running: map[string]int{}, highest: map[string]int{}}
}

func (r *timedRuns) Run(ctx context.Context, req run.Request) (*run.Result, error) {
	r.mu.Lock()
	r.running[req.Budget]++
	r.highest[req.Budget] = max(r.highest[req.Budget], r.running[req.Budget])
	r.starts = append(r.starts, req)
	r.mu.Unlock()
	if r.held != nil {
		select {
		case <-r.held:
		case <-ctx.Done():
		}
	}
	select {
	case <-time.After(r.duration):
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[req.Budget]--
	r.ends = append(r.ends, req)
	if r.fail != nil {
		if err := r.fail(req); err != nil {
			return nil, err
		}
	}
	return &run.Result{}, nil
}

func (r *timedRuns) ended() []run.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]run.Request(nil), r.ends...)
}

func (r *timedRuns) started() []run.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]run.Request(nil), r.starts...)
}

func (r *timedRuns) highestOf(budget string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest[budget]
}

// startScheduler runs s until the test ends; its finished runs are forgotten at once, as
// the reconciles that read them do.
func startScheduler(t testing.TB, s *Scheduler) {
	t.Helper()
	s.Finished = func(id run.ID) { go s.Cancel(id) }
	runUntilCleanup(t, s.Start)
	// Runs submitted before the start wait for it: the tests count on them starting at once.
	NewWithT(t).Eventually(func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.ctx != nil
	}).Should(BeTrue())
}

func budgetRequest(name, budget, project string) run.Request {
	return run.Request{ID: run.ID{Namespace: "shoot--" + project + "--" + name, Name: "infrastructure", Purpose: run.PurposeInfra}, Command: run.Apply, Budget: budget, Project: project}
}

var throttling = &run.Error{Command: "apply", Blocks: []string{"creating EC2 VPC: api error RequestLimitExceeded: run.Request limit exceeded."}, Message: "throttled", Err: run.ErrTerraformFailed}

func isThrottling(err error) bool { return errors.Is(err, run.ErrTerraformFailed) }

func TestAnAccountsRunsStayWithinItsBudgetWhileOtherAccountsPassBy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	runs := newTimedRuns(300 * time.Millisecond)
	s := &Scheduler{Executor: runs, MaxRuns: 4, RunsPerAccount: 2,
		BudgetRuns: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "budget_runs"}, []string{"budget", "state"})}
	startScheduler(t, s)
	a, b := "0a", "0b"

	// Account a's five runs come first, b's two after them: b's pass a's waiting ones by.
	for i := range 5 {
		g.Expect(s.Submit(ctx, budgetRequest(fmt.Sprintf("a%d", i), a, "p"), run.PriorityCreate)).To(Succeed())
	}
	for i := range 2 {
		g.Expect(s.Submit(ctx, budgetRequest(fmt.Sprintf("b%d", i), b, "p"), run.PriorityCreate)).To(Succeed())
	}
	g.Expect(testutil.ToFloat64(s.BudgetRuns.WithLabelValues(a, "running"))).To(BeEquivalentTo(2))
	g.Expect(testutil.ToFloat64(s.BudgetRuns.WithLabelValues(a, "waiting"))).To(BeEquivalentTo(3))
	g.Expect(testutil.ToFloat64(s.BudgetRuns.WithLabelValues(b, "running"))).To(BeEquivalentTo(2), "b's runs took the free slots")
	ticket, _ := s.Lookup(budgetRequest("a2", a, "p").ID)
	g.Expect(ticket.Phase).To(Equal(run.PhaseWaiting))
	g.Expect(ticket.OverBudget).To(BeTrue(), "a's third run waits for its account's budget, not for a slot")

	g.Eventually(func() int { return len(runs.ended()) }).WithTimeout(10 * time.Second).Should(Equal(7))
	g.Expect(runs.highestOf(a)).To(Equal(2))
	g.Expect(runs.highestOf(b)).To(Equal(2))
	g.Expect(testutil.ToFloat64(s.BudgetRuns.WithLabelValues(a, "waiting"))).To(BeEquivalentTo(0))
}

func TestAThrottledAccountBacksOffAloneAndRecoversAfterSuccesses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := "0a", "0b"
	runs := newTimedRuns(100 * time.Millisecond)
	var throttle sync.Mutex
	throttleA := true
	runs.fail = func(req run.Request) error {
		throttle.Lock()
		defer throttle.Unlock()
		if req.Budget == a && throttleA {
			throttleA = false
			return throttling
		}
		return nil
	}
	var backoffs []run.Backoff
	var mu sync.Mutex
	const pause = 2 * time.Second
	s := &Scheduler{Executor: runs, MaxRuns: 8, RunsPerAccount: 4, ThrottlePause: pause,
		Throttled: func(_ run.ID, b run.Backoff) {
			mu.Lock()
			defer mu.Unlock()
			backoffs = append(backoffs, b)
		},
		BudgetSlots: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "budget_slots"}, []string{"budget"}),
		Throttles:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "throttles"}, []string{"budget"}),
	}
	startScheduler(t, s)
	throttled := budgetRequest("throttled", a, "p")
	throttled.Throttled = isThrottling
	g.Expect(s.Submit(ctx, throttled, run.PriorityReconcile)).To(Succeed())
	g.Eventually(func() float64 { return testutil.ToFloat64(s.Throttles.WithLabelValues(a)) }).WithTimeout(5 * time.Second).Should(BeEquivalentTo(1))
	mu.Lock()
	g.Expect(backoffs).To(Equal([]run.Backoff{{Budget: a, Slots: 2, Pause: pause}}), "half the slots, and a pause")
	mu.Unlock()
	g.Expect(testutil.ToFloat64(s.BudgetSlots.WithLabelValues(a))).To(BeEquivalentTo(2))

	// While a pauses, its runs wait and b's start at once.
	paused := time.Now()
	for i := range 6 {
		g.Expect(s.Submit(ctx, budgetRequest(fmt.Sprintf("a%d", i), a, "p"), run.PriorityReconcile)).To(Succeed())
		g.Expect(s.Submit(ctx, budgetRequest(fmt.Sprintf("b%d", i), b, "p"), run.PriorityReconcile)).To(Succeed())
	}
	ticket, _ := s.Lookup(budgetRequest("a0", a, "p").ID)
	g.Expect(ticket.OverBudget).To(BeTrue())
	g.Eventually(func() int { return countOf(runs.ended(), b) }).WithTimeout(5 * time.Second).Should(Equal(6))
	g.Expect(time.Since(paused)).To(BeNumerically("<", pause), "b's runs never waited for a's pause")
	g.Expect(countOf(runs.started(), a)).To(Equal(1), "none of a's runs started during its pause")

	g.Eventually(func() int { return countOf(runs.ended(), a) }).WithTimeout(10 * time.Second).Should(Equal(7))
	g.Expect(time.Since(paused)).To(BeNumerically(">=", pause-100*time.Millisecond), "a's runs waited for the pause, which began at the throttle's end")
	g.Expect(runs.highestOf(a)).To(BeNumerically("<=", 4))
	// Each success gave a slot back: the budget is whole again.
	g.Expect(testutil.ToFloat64(s.BudgetSlots.WithLabelValues(a))).To(BeEquivalentTo(4))
	g.Expect(testutil.ToFloat64(s.BudgetSlots.WithLabelValues(b))).To(BeEquivalentTo(4))
}

func TestThrottlesInARowPauseLongerUpToTheBound(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a := "0a"
	runs := newTimedRuns(time.Millisecond)
	runs.fail = func(run.Request) error { return throttling }
	backoffs := make(chan run.Backoff, 10)
	s := &Scheduler{Executor: runs, MaxRuns: 2, RunsPerAccount: 2, ThrottlePause: 50 * time.Millisecond, MaxThrottlePause: 150 * time.Millisecond,
		Throttled: func(_ run.ID, b run.Backoff) { backoffs <- b },
		Throttles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "throttles"}, []string{"budget"})}
	startScheduler(t, s)
	var got []run.Backoff
	for i := range 3 {
		req := budgetRequest(fmt.Sprintf("a%d", i), a, "p")
		req.Throttled = isThrottling
		g.Expect(s.Submit(ctx, req, run.PriorityReconcile)).To(Succeed())
		select {
		case b := <-backoffs:
			got = append(got, b)
		case <-time.After(5 * time.Second):
			t.Fatal("no backoff")
		}
	}
	g.Expect(got).To(Equal([]run.Backoff{
		{Budget: a, Slots: 1, Pause: 50 * time.Millisecond},
		{Budget: a, Slots: 1, Pause: 100 * time.Millisecond},
		{Budget: a, Slots: 1, Pause: 150 * time.Millisecond},
	}))

	// At one slot and the longest pause, a throttle is counted and not told again.
	req := budgetRequest("a3", a, "p")
	req.Throttled = isThrottling
	g.Expect(s.Submit(ctx, req, run.PriorityReconcile)).To(Succeed())
	g.Eventually(func() int { return len(runs.ended()) }).WithTimeout(5 * time.Second).Should(Equal(4))
	g.Consistently(backoffs).WithTimeout(200 * time.Millisecond).ShouldNot(Receive())
	g.Expect(testutil.ToFloat64(s.Throttles.WithLabelValues(a))).To(BeEquivalentTo(4))
}

func countOf(reqs []run.Request, budget string) int {
	n := 0
	for _, r := range reqs {
		if r.Budget == budget {
			n++
		}
	}
	return n
}

// Project A submits 100 reconciles, then project B 5: within one priority the projects
// take turns, so that B's finish before A's last 50.
func TestProjectsTakeTurnsForTheSlotsOfOnePriority(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	runs := newTimedRuns(5 * time.Millisecond)
	runs.held = make(chan struct{})
	s := &Scheduler{Executor: runs, MaxRuns: 2}
	startScheduler(t, s)
	for i := range 100 {
		g.Expect(s.Submit(ctx, budgetRequest(fmt.Sprintf("a%03d", i), "", "a"), run.PriorityReconcile)).To(Succeed())
	}
	for i := range 5 {
		g.Expect(s.Submit(ctx, budgetRequest(fmt.Sprintf("b%d", i), "", "b"), run.PriorityReconcile)).To(Succeed())
	}
	// Two of A's are under way by now (else B's would not come after them), and none ended
	// while the others were submitted, which on a slow machine takes longer than a run.
	g.Eventually(func() int { return len(runs.started()) }).Should(Equal(2))
	close(runs.held)
	g.Eventually(func() int { return len(runs.ended()) }).WithTimeout(30 * time.Second).Should(Equal(105))
	lastB, aBefore := 0, 0
	for i, r := range runs.ended() {
		if r.Project == "b" {
			lastB = i
		}
	}
	for _, r := range runs.ended()[:lastB] {
		if r.Project == "a" {
			aBefore++
		}
	}
	g.Expect(aBefore).To(BeNumerically("<", 50), "B's runs ended before A's last 50")
	// Turns, not priority: B's came after the two of A under way and took every other slot.
	g.Expect(aBefore).To(BeNumerically("<=", 2+5+1))
}

// A drift plan behind a steady stream of reconciles, with one slot: it starts at most
// DriftAging after it was submitted, plus one run's end (the run under way when it aged).
func TestADriftPlanBehindASteadyStreamOfReconcilesRunsWithinItsAgingAndOneRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const runTime, aging = 20 * time.Millisecond, 400 * time.Millisecond
	runs := newTimedRuns(runTime)
	s := &Scheduler{Executor: runs, MaxRuns: 1, DriftAging: aging}
	startScheduler(t, s)

	// The stream: three reconciles waiting at all times, a new one for each that ends.
	stop := make(chan struct{})
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		for i := 0; ; {
			select {
			case <-stop:
				return
			default:
			}
			for len(runs.started())+3 > i {
				if err := s.Submit(ctx, budgetRequest(fmt.Sprintf("r%d", i), "", fmt.Sprintf("p%d", i%4)), run.PriorityReconcile); err != nil {
					t.Error(err)
					return
				}
				i++
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() {
		close(stop)
		<-streamed
	}()
	time.Sleep(100 * time.Millisecond)
	drift := budgetRequest("drift", "", "p0")
	drift.Command = run.Plan
	submitted := time.Now()
	g.Expect(s.Submit(ctx, drift, run.PriorityDrift)).To(Succeed())
	var waited time.Duration
	g.Eventually(func() bool {
		ticket, known := s.Lookup(drift.ID)
		waited = time.Since(submitted)
		return !known || ticket.Phase != run.PhaseWaiting
	}).WithTimeout(5*time.Second).WithPolling(time.Millisecond).Should(BeTrue(), "the drift plan started")
	g.Expect(waited).To(BeNumerically(">=", aging), "before it aged, the reconciles went first")
	// The bound, with room for a loaded machine's scheduling of goroutines; without the
	// aging the plan never starts while the stream goes on.
	g.Expect(waited).To(BeNumerically("<", aging+runTime+500*time.Millisecond))
}
