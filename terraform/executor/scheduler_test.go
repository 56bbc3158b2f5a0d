package executor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
)

// startedScheduler runs a scheduler over the local executor of f until the test ends, and
// records the order in which its runs end.
func startedScheduler(t *testing.T, f *fixture, maxRuns int, driftShare float64) (*Scheduler, *endOrder) {
	t.Helper()
	ends := &endOrder{}
	s := &Scheduler{
		Executor: f.executor, MaxRuns: maxRuns, DriftShare: driftShare, Finished: ends.add,
		Waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "waiting"}, []string{"priority"}),
	}
	runUntilCleanup(t, s.Start)
	return s, ends
}

type endOrder struct {
	mu  sync.Mutex
	ids []run.ID
}

func (o *endOrder) add(id run.ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids = append(o.ids, id)
}

func (o *endOrder) get() []run.ID {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]run.ID(nil), o.ids...)
}

// heldApply is an Infrastructure whose apply, once started, holds its run slot at a gate
// until the test opens it.
func heldApply(t *testing.T) (*fixture, *tftest.Gate) {
	busy := newFixture(t, 0)
	gate := busy.NewGate(1)
	busy.WriteChainConfig(2, gate)
	return busy, gate
}

// oneSlotHeld runs a scheduler of one run slot, which a reconcile's apply holds at its
// gate until the test opens it.
func oneSlotHeld(t *testing.T) (*Scheduler, *endOrder, *fixture, *tftest.Gate) {
	busy, gate := heldApply(t)
	s, ends := startedScheduler(t, busy, 1, 1)
	NewWithT(t).Expect(s.Submit(context.Background(), busy.request(run.Apply), run.PriorityReconcile)).To(Succeed())
	gate.WaitUntilReached()
	return s, ends, busy, gate
}

// expectInLine expects the runs of fixtures to wait for a slot in this order.
func expectInLine(g Gomega, s *Scheduler, fixtures ...*fixture) {
	for want, f := range fixtures {
		ticket, known := s.Lookup(f.Objects.ID)
		g.Expect(known).To(BeTrue())
		g.Expect(ticket.Phase).To(Equal(run.PhaseWaiting))
		g.Expect(ticket.Ahead).To(Equal(want), "runs ahead of the %d. in line", want+1)
	}
}

// neighbour is another Infrastructure, in its own namespace, run by the executor of f.
func neighbour(t *testing.T, f *fixture) *fixture {
	n := newFixture(t, 1)
	n.executor = f.executor
	return n
}

func TestACreateStartsBeforeTheDriftPlansWaitingForARunSlot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	busy, gate := heldApply(t)
	s, ends := startedScheduler(t, busy, 1, 1)

	// The one slot is taken by an apply held at its gate.
	g.Expect(s.Submit(ctx, busy.request(run.Apply), run.PriorityReconcile)).To(Succeed())
	gate.WaitUntilReached()

	drift1, drift2, create := neighbour(t, busy), neighbour(t, busy), neighbour(t, busy)
	g.Expect(s.Submit(ctx, drift1.request(run.Plan), run.PriorityDrift)).To(Succeed())
	g.Expect(s.Submit(ctx, drift2.request(run.Plan), run.PriorityDrift)).To(Succeed())
	g.Expect(s.Submit(ctx, create.request(run.Apply), run.PriorityCreate)).To(Succeed())

	ahead := func(f *fixture) int {
		ticket, known := s.Lookup(f.Objects.ID)
		g.Expect(known).To(BeTrue())
		g.Expect(ticket.Phase).To(Equal(run.PhaseWaiting))
		return ticket.Ahead
	}
	g.Expect(ahead(create)).To(Equal(0), "the create is next")
	g.Expect(ahead(drift1)).To(Equal(1))
	g.Expect(ahead(drift2)).To(Equal(2))
	g.Expect(testutil.ToFloat64(s.Waiting.WithLabelValues("drift"))).To(BeEquivalentTo(2))
	g.Expect(testutil.ToFloat64(s.Waiting.WithLabelValues("create"))).To(BeEquivalentTo(1))

	// A submitted run of an ID already known is refused.
	err := s.Submit(ctx, create.request(run.Apply), run.PriorityCreate)
	g.Expect(err).To(MatchError(run.ErrRunInProgress))

	gate.Open()
	g.Eventually(ends.get).WithTimeout(3 * time.Minute).Should(HaveLen(4))
	g.Expect(ends.get()).To(Equal([]run.ID{busy.Objects.ID, create.Objects.ID, drift1.Objects.ID, drift2.Objects.ID}),
		"one slot: the apply under way, then the create, then the drift plans in their order")
	for _, f := range []*fixture{busy, create, drift1, drift2} {
		ticket, known := s.Lookup(f.Objects.ID)
		g.Expect(known).To(BeTrue())
		g.Expect(ticket.Phase).To(Equal(run.PhaseDone))
		g.Expect(ticket.Err).NotTo(HaveOccurred())
		s.Cancel(f.Objects.ID)
		_, known = s.Lookup(f.Objects.ID)
		g.Expect(known).To(BeFalse(), "a taken outcome is forgotten")
	}
	g.Expect(create.Items(g)).To(HaveLen(1), "the create applied")
	g.Expect(drift1.Items(g)).To(BeEmpty(), "a plan applies nothing")
	g.Expect(testutil.ToFloat64(s.Waiting.WithLabelValues("drift"))).To(BeEquivalentTo(0))
}

// An urgent run, a DNSRecord's that gardenlet waits for on a short deadline, waits for
// the next free slot only, not behind a backlog of creations; an urgent drift plan is a
// drift plan still.
func TestAnUrgentReconcileStartsBeforeTheCreatesWaitingForARunSlot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, ends, busy, gate := oneSlotHeld(t)

	create1, create2, urgent, urgentPlan := neighbour(t, busy), neighbour(t, busy), neighbour(t, busy), neighbour(t, busy)
	g.Expect(s.Submit(ctx, create1.request(run.Apply), run.PriorityCreate)).To(Succeed())
	g.Expect(s.Submit(ctx, create2.request(run.Apply), run.PriorityCreate)).To(Succeed())
	plan := urgentPlan.request(run.Plan)
	plan.Urgent = true
	g.Expect(s.Submit(ctx, plan, run.PriorityDrift)).To(Succeed())
	apply := urgent.request(run.Apply)
	apply.Urgent = true
	g.Expect(s.Submit(ctx, apply, run.PriorityReconcile)).To(Succeed())

	expectInLine(g, s, urgent, create1, create2, urgentPlan)
	gate.Open()
	g.Eventually(ends.get).WithTimeout(3 * time.Minute).Should(HaveLen(5))
	g.Expect(ends.get()).To(Equal([]run.ID{busy.Objects.ID, urgent.Objects.ID, create1.Objects.ID, create2.Objects.ID, urgentPlan.Objects.ID}),
		"one slot: the apply under way, then the urgent reconcile, the creates, and the drift plan")
}

// Among urgent runs (a DNSRecord's), a change of an object that serves already starts
// before the creations that wait: a seed's backlog of every shoot's records would
// otherwise hold it for longer than gardenlet waits.
func TestAnUrgentReconcileStartsBeforeTheUrgentCreatesWaitingForARunSlot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, ends, busy, gate := oneSlotHeld(t)

	create1, create2, change, deletion := neighbour(t, busy), neighbour(t, busy), neighbour(t, busy), neighbour(t, busy)
	for _, f := range []*fixture{create1, create2} {
		req := f.request(run.Apply)
		req.Urgent = true
		g.Expect(s.Submit(ctx, req, run.PriorityCreate)).To(Succeed())
	}
	req := change.request(run.Apply)
	req.Urgent = true
	g.Expect(s.Submit(ctx, req, run.PriorityReconcile)).To(Succeed())
	req = deletion.request(run.Destroy)
	req.Urgent = true
	g.Expect(s.Submit(ctx, req, run.PriorityDelete)).To(Succeed())

	expectInLine(g, s, deletion, change, create1, create2)
	gate.Open()
	g.Eventually(ends.get).WithTimeout(3 * time.Minute).Should(HaveLen(5))
	g.Expect(ends.get()).To(Equal([]run.ID{busy.Objects.ID, deletion.Objects.ID, change.Objects.ID, create1.Objects.ID, create2.Objects.ID}),
		"one slot: the apply under way, then the urgent deletion, the urgent change, and the urgent creates")
}

func TestDriftPlansTakeNoMoreThanTheirShareOfTheRunSlots(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	busy, gate := heldApply(t)
	// Three slots, a third of them for drift plans: one.
	s, ends := startedScheduler(t, busy, 3, 0.34)
	g.Expect(s.Submit(ctx, busy.request(run.Apply), run.PriorityReconcile)).To(Succeed())
	gate.WaitUntilReached()

	var plans []*fixture
	for range 3 {
		f := neighbour(t, busy)
		plans = append(plans, f)
		g.Expect(s.Submit(ctx, f.request(run.Plan), run.PriorityDrift)).To(Succeed())
	}
	// While the apply holds a slot, two are free, yet drift plans run one at a time.
	highest := 0
	g.Eventually(func() int {
		running := 0
		for _, f := range plans {
			if ticket, _ := s.Lookup(f.Objects.ID); ticket.Phase == run.PhaseRunning {
				running++
			}
		}
		highest = max(highest, running)
		return len(ends.get())
	}).WithTimeout(3 * time.Minute).WithPolling(10 * time.Millisecond).Should(Equal(3))
	g.Expect(highest).To(Equal(1), "drift plans under way at once")

	// A run of another priority takes a free slot beside them.
	ticket, _ := s.Lookup(busy.Objects.ID)
	g.Expect(ticket.Phase).To(Equal(run.PhaseRunning), "the apply is still held at its gate")
	gate.Open()
	g.Eventually(ends.get).WithTimeout(time.Minute).Should(HaveLen(4))
}

func TestACancelledWaitingRunNeverStarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, ends, busy, gate := oneSlotHeld(t)
	g.Expect(s.Cancel(busy.Objects.ID)).To(BeFalse(), "a run under way is not cancelled")

	waiting := neighbour(t, busy)
	g.Expect(s.Submit(ctx, waiting.request(run.Apply), run.PriorityReconcile)).To(Succeed())
	g.Expect(s.Cancel(waiting.Objects.ID)).To(BeTrue())
	gate.Open()
	g.Eventually(ends.get).WithTimeout(time.Minute).Should(HaveLen(1))
	g.Consistently(ends.get).WithTimeout(3 * time.Second).Should(HaveLen(1))
	g.Expect(waiting.Items(g)).To(BeEmpty(), "the cancelled apply never ran")
}

// A deletion stops the run under way: Stop interrupts it as a shutdown does, the run
// saves what it created, and its end is recorded and told, so that the deletion goes on.
func TestStopInterruptsARunUnderWayWhichSavesItsStateAndEnds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	busy, gate := heldApply(t)
	s, ends := startedScheduler(t, busy, 1, 1)
	g.Expect(s.Submit(ctx, busy.request(run.Apply), run.PriorityCreate)).To(Succeed())
	gate.WaitUntilReached()

	ended, err := s.Stop(ctx, busy.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ended).To(BeFalse(), "the run under way takes time to stop")
	ticket, _ := s.Lookup(busy.Objects.ID)
	g.Expect(ticket.Stopping).To(BeTrue())
	g.Expect(s.Cancel(busy.Objects.ID)).To(BeFalse(), "a run under way is not forgotten, and Cancel says so")

	g.Eventually(ends.get).WithTimeout(time.Minute).Should(Equal([]run.ID{busy.Objects.ID}), "the stopped run's end is told")
	done, known := s.Take(busy.Objects.ID)
	g.Expect(known).To(BeTrue())
	g.Expect(done.Err).To(HaveOccurred(), "a stopped run did not succeed")
	created, listed := busy.ExpectNoLostStateEntry(g)
	g.Expect(created).To(Equal(2), "the run was stopped beside its gate, after the second create")
	g.Expect(listed).To(BeNumerically(">=", 1))
	g.Expect(busy.Items(g)).To(HaveLen(2), "the stopped run went no further")

	ended, err = s.Stop(ctx, busy.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ended).To(BeTrue(), "no run is under way any more")
}

// Stop drops a run that waits for a slot: it never starts.
func TestStopDropsAWaitingRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, ends, busy, gate := oneSlotHeld(t)
	waiting := neighbour(t, busy)
	g.Expect(s.Submit(ctx, waiting.request(run.Apply), run.PriorityCreate)).To(Succeed())

	ended, err := s.Stop(ctx, waiting.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ended).To(BeTrue())
	_, known := s.Lookup(waiting.Objects.ID)
	g.Expect(known).To(BeFalse())
	gate.Open()
	g.Eventually(ends.get).WithTimeout(time.Minute).Should(HaveLen(1))
	g.Consistently(ends.get).WithTimeout(3 * time.Second).Should(HaveLen(1))
	g.Expect(waiting.Items(g)).To(BeEmpty(), "the dropped apply never ran")
}

// Runs are known by their owner's UID: the outcome of an earlier owner's run is never read
// as the run of a later owner of the same name, and a finished ticket keeps its state
// compressed until the outcome is taken whole.
func TestARunIsKnownByItsOwnersUIDAndKeepsItsStateCompressedUntilTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 2)
	s, ends := startedScheduler(t, f, 1, 1)
	earlier := f.request(run.Apply)
	earlier.ID.UID = "11111111-1111-1111-1111-111111111111"
	g.Expect(s.Submit(ctx, earlier, run.PriorityCreate)).To(Succeed())
	g.Eventually(ends.get).WithTimeout(time.Minute).Should(HaveLen(1))

	later := earlier
	later.ID.UID = "22222222-2222-2222-2222-222222222222"
	_, known := s.Lookup(later.ID)
	g.Expect(known).To(BeFalse(), "the later owner does not see the earlier owner's run")
	_, known = s.Take(later.ID)
	g.Expect(known).To(BeFalse())

	ticket, known := s.Lookup(earlier.ID)
	g.Expect(known).To(BeTrue())
	g.Expect(ticket.Phase).To(Equal(run.PhaseDone))
	g.Expect(ticket.Result).NotTo(BeNil())
	g.Expect(ticket.Result.State).To(BeNil(), "a finished ticket holds no whole state")
	g.Expect(ticket.Result.Outputs).NotTo(BeEmpty())
	done, known := s.Take(earlier.ID)
	g.Expect(known).To(BeTrue())
	g.Expect(done.Err).NotTo(HaveOccurred())
	stored, err := f.Objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done.Result.State).To(Equal(stored), "the outcome taken holds the whole state")
	_, known = s.Lookup(earlier.ID)
	g.Expect(known).To(BeFalse(), "a taken outcome is forgotten")

	s.ForgetName(later.ID)
	g.Expect(s.Submit(ctx, later, run.PriorityCreate)).To(Succeed(), "the later owner runs its own")
	g.Eventually(ends.get).WithTimeout(time.Minute).Should(HaveLen(2))
}

// A waiting run holds no credentials: the scheduler drops them when it queues the run,
// and reads them (run.Request.LoadEnv) when the run gets its slot, here from a Secret of
// the API server, as they are then. Credentials that cannot be read fail the run before
// terraform starts.
func TestAWaitingRunHoldsNoCredentialsAndReadsThemAsItStarts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, ends, busy, gate := oneSlotHeld(t)

	waiting, unreadable := neighbour(t, busy), neighbour(t, busy)
	source := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: waiting.Namespace, Name: "cloudprovider"},
		Data:       map[string][]byte{"TF_VAR_kubeconfig": []byte("not a kubeconfig yet")},
	}
	g.Expect(env.Client.Create(ctx, source)).To(Succeed())
	var reads atomic.Int32
	req := waiting.request(run.Apply)
	req.LoadEnv = func(ctx context.Context) (map[string]string, error) {
		reads.Add(1)
		read := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(source), read); err != nil {
			return nil, err
		}
		return map[string]string{"TF_VAR_kubeconfig": string(read.Data["TF_VAR_kubeconfig"])}, nil
	}
	g.Expect(s.Submit(ctx, req, run.PriorityCreate)).To(Succeed())
	failing := unreadable.request(run.Apply)
	failing.LoadEnv = func(ctx context.Context) (map[string]string, error) {
		return nil, errors.New("the secret is gone")
	}
	g.Expect(s.Submit(ctx, failing, run.PriorityCreate)).To(Succeed())

	s.mu.Lock()
	held := s.tickets[waiting.Objects.ID].req.Env
	s.mu.Unlock()
	g.Expect(held).To(BeNil(), "the waiting run's credentials")
	g.Expect(reads.Load()).To(BeZero())

	// Only what the Secret holds as the run starts lets terraform reach the API server.
	source.Data["TF_VAR_kubeconfig"] = []byte(waiting.Kubeconfig)
	g.Expect(env.Client.Update(ctx, source)).To(Succeed())
	gate.Open()
	g.Eventually(ends.get).WithTimeout(3 * time.Minute).Should(HaveLen(3))
	g.Expect(reads.Load()).To(BeEquivalentTo(1))
	done, ok := s.Take(waiting.Objects.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(done.Err).NotTo(HaveOccurred())
	waiting.ExpectEachItemOnceInState(g, 1)

	failed, ok := s.Take(unreadable.Objects.ID)
	g.Expect(ok).To(BeTrue())
	g.Expect(failed.Err).To(MatchError(ErrCredentialsNotRead))
	g.Expect(failed.Err).To(MatchError(ContainSubstring("the secret is gone")))
	g.Expect(unreadable.Items(g)).To(BeEmpty(), "no terraform ran")
	g.Expect(unreadable.Objects.ReadState(ctx, env.Client)).To(BeEmpty())
}

// A ticket says when its run was submitted: a reconcile looks at a long wait less often.
func TestATicketSaysWhenItsRunWasSubmitted(t *testing.T) {
	g := NewWithT(t)
	s, ends, busy, gate := oneSlotHeld(t)
	waiting := neighbour(t, busy)
	before := time.Now()
	g.Expect(s.Submit(context.Background(), waiting.request(run.Apply), run.PriorityReconcile)).To(Succeed())
	after := time.Now()
	ticket, known := s.Lookup(waiting.Objects.ID)
	g.Expect(known).To(BeTrue())
	g.Expect(ticket.Phase).To(Equal(run.PhaseWaiting))
	g.Expect(ticket.Submitted).To(BeTemporally(">=", before))
	g.Expect(ticket.Submitted).To(BeTemporally("<=", after))
	gate.Open()
	g.Eventually(ends.get).WithTimeout(3 * time.Minute).Should(HaveLen(2))
}
