package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/terraseed/terraseed/terraform/run"
)

// A pipeline runs what is submitted with its configuration's settings, measures the runs,
// tells each end to its owner, and asks for a reconcile of the run's object.
func TestPipelineRunsMeasuresAndTellsTheEndsOfRuns(t *testing.T) {
	g := NewWithT(t)
	runs := newTimedRuns(50 * time.Millisecond)
	failure := errors.New("terraform failed")
	runs.fail = func(req run.Request) error {
		if req.ID.Namespace == "failing" {
			return failure
		}
		return nil
	}
	type end struct {
		id  run.ID
		err error
	}
	ends := make(chan end, 2)
	p := NewPipeline(runs, Config{MaxRuns: 3, DriftShare: 0.5, RunsPerAccount: 2}, run.Hooks{Ended: func(req run.Request, err error) { ends <- end{req.ID, err} }})
	g.Expect(p.maxRuns()).To(Equal(3))
	g.Expect(p.driftSlots()).To(Equal(1))
	g.Expect(p.fullBudget()).To(Equal(2))

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(queue.ShutDown)
	g.Expect(p.Ends(run.PurposeInfra, false).Start(context.Background(), queue)).To(Succeed())
	ctx := startPipeline(t, p)

	succeeded := testutil.ToFloat64(runsTotal.WithLabelValues("infrastructure", "apply", "succeeded"))
	failed := testutil.ToFloat64(runsTotal.WithLabelValues("infrastructure", "apply", "failed"))
	ok := run.ID{Namespace: "succeeding", Name: "infrastructure", Purpose: run.PurposeInfra}
	bad := run.ID{Namespace: "failing", Name: "infrastructure", Purpose: run.PurposeInfra}
	g.Expect(p.Submit(ctx, run.Request{ID: ok, Command: run.Apply}, run.PriorityReconcile)).To(Succeed())
	g.Expect(p.Submit(ctx, run.Request{ID: bad, Command: run.Apply}, run.PriorityReconcile)).To(Succeed())

	got := map[run.ID]error{}
	for range 2 {
		select {
		case e := <-ends:
			got[e.id] = e.err
		case <-time.After(10 * time.Second):
			t.Fatal("the runs did not end")
		}
	}
	g.Expect(got).To(HaveKeyWithValue(ok, BeNil()))
	g.Expect(got).To(HaveKeyWithValue(bad, MatchError(failure)))

	requests := map[reconcile.Request]bool{}
	for range 2 {
		item, _ := queue.Get()
		requests[item] = true
		queue.Done(item)
	}
	g.Expect(requests).To(HaveKey(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "succeeding", Name: "infrastructure"}}))
	g.Expect(requests).To(HaveKey(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "failing", Name: "infrastructure"}}))

	g.Expect(testutil.ToFloat64(runsTotal.WithLabelValues("infrastructure", "apply", "succeeded"))).To(Equal(succeeded + 1))
	g.Expect(testutil.ToFloat64(runsTotal.WithLabelValues("infrastructure", "apply", "failed"))).To(Equal(failed + 1))
	ticket, done2 := p.Take(bad)
	g.Expect(done2).To(BeTrue())
	g.Expect(ticket.Err).To(MatchError(failure))
}

// An executor that cannot tell or stop the runs of an earlier process tells none, and
// stops none.
func TestPipelineOfAnExecutorWithoutRunsElsewhere(t *testing.T) {
	g := NewWithT(t)
	p := NewPipeline(newTimedRuns(time.Millisecond), Config{}, run.Hooks{})
	id := run.ID{Namespace: "ns", Name: "infrastructure", Purpose: run.PurposeInfra}
	active, err := p.Active(context.Background(), id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeFalse())
	asked, err := p.Interrupt(context.Background(), id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(asked).To(BeFalse())
	g.Expect(p.Clean(context.Background(), id)).To(Succeed())
	g.Expect(p.maxRuns()).To(Equal(DefaultMaxRuns))
}

// One pipeline serves the runs of every kind: the end of a run reconciles the object of
// its own kind's controller, named as the run, in no namespace for a cluster-scoped kind.
func TestTheEndOfARunReconcilesTheObjectOfItsKind(t *testing.T) {
	g := NewWithT(t)
	p := NewPipeline(newTimedRuns(time.Millisecond), Config{MaxRuns: 4}, run.Hooks{})
	newQueue := func() workqueue.TypedRateLimitingInterface[reconcile.Request] {
		queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(queue.ShutDown)
		return queue
	}
	infras, records, buckets := newQueue(), newQueue(), newQueue()
	g.Expect(p.Ends(run.PurposeInfra, false).Start(context.Background(), infras)).To(Succeed())
	g.Expect(p.Ends("dnsrecord", false).Start(context.Background(), records)).To(Succeed())
	g.Expect(p.Ends("backupbucket", true).Start(context.Background(), buckets)).To(Succeed())
	ctx := startPipeline(t, p)

	for _, id := range []run.ID{
		{Namespace: "shoot--a--b", Name: "b", Purpose: run.PurposeInfra},
		{Namespace: "shoot--a--b", Name: "b", Purpose: "dnsrecord"},
		{Namespace: "garden-terraseed", Name: "seed-uid", Purpose: "backupbucket"},
		// No controller serves bastions: their ends reach no queue.
		{Namespace: "shoot--a--b", Name: "cli", Purpose: "bastion"},
	} {
		g.Expect(p.Submit(ctx, run.Request{ID: id, Command: run.Apply}, run.PriorityReconcile)).To(Succeed())
	}
	g.Eventually(func() []int { return []int{infras.Len(), records.Len(), buckets.Len()} }, 10*time.Second).Should(Equal([]int{1, 1, 1}))
	g.Eventually(func() run.Phase {
		ticket, _ := p.Lookup(run.ID{Namespace: "shoot--a--b", Name: "cli", Purpose: "bastion"})
		return ticket.Phase
	}).Should(Equal(run.PhaseDone))
	next := func(queue workqueue.TypedRateLimitingInterface[reconcile.Request]) types.NamespacedName {
		item, _ := queue.Get()
		queue.Done(item)
		return item.NamespacedName
	}
	g.Expect(next(infras)).To(Equal(types.NamespacedName{Namespace: "shoot--a--b", Name: "b"}))
	g.Expect(next(records)).To(Equal(types.NamespacedName{Namespace: "shoot--a--b", Name: "b"}))
	g.Expect(next(buckets)).To(Equal(types.NamespacedName{Name: "seed-uid"}))
	g.Expect([]int{infras.Len(), records.Len(), buckets.Len()}).To(Equal([]int{0, 0, 0}), "each end reached its own kind's queue once")
}

// The end of a run goes ahead of the requests a controller's queue holds already (a
// burst of creations): its reconcile finishes an operation someone waits for.
func TestTheEndOfARunGoesAheadOfTheQueuedRequests(t *testing.T) {
	g := NewWithT(t)
	p := NewPipeline(newTimedRuns(time.Millisecond), Config{MaxRuns: 4}, run.Hooks{})
	queue := priorityqueue.New[reconcile.Request]("records")
	t.Cleanup(queue.ShutDown)
	g.Expect(p.Ends("dnsrecord", false).Start(context.Background(), queue)).To(Succeed())
	ctx := startPipeline(t, p)
	created := []types.NamespacedName{{Namespace: "shoot--a--c", Name: "c"}, {Namespace: "shoot--a--d", Name: "d"}}
	for _, key := range created {
		queue.Add(reconcile.Request{NamespacedName: key})
	}
	id := run.ID{Namespace: "shoot--a--b", Name: "b", Purpose: "dnsrecord"}
	g.Expect(p.Submit(ctx, run.Request{ID: id, Command: run.Apply}, run.PriorityReconcile)).To(Succeed())
	g.Eventually(queue.Len, 10*time.Second).Should(Equal(3))

	var order []types.NamespacedName
	for range 3 {
		item, priority, _ := queue.GetWithPriority()
		queue.Done(item)
		order = append(order, item.NamespacedName)
		if item.NamespacedName.Name == "b" {
			g.Expect(priority).To(Equal(PriorityRunEnded))
		}
	}
	g.Expect(order).To(Equal(append([]types.NamespacedName{{Namespace: "shoot--a--b", Name: "b"}}, created...)))
}

// startPipeline runs p until the test ends, and returns the context it runs in.
func startPipeline(t *testing.T, p *Pipeline) context.Context {
	return runUntilCleanup(t, p.Start)
}

// runUntilCleanup runs start in the background until the test ends, and waits for it to
// return then; it returns the context start runs in.
func runUntilCleanup(t testing.TB, start func(context.Context) error) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ctx
}
