package kinds

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
)

// fakeRuns is a run pipeline whose runs never run: a test sets the tickets.
type fakeRuns struct {
	tickets   map[run.ID]run.Ticket
	submitted []submission
	// cancelled are the IDs Cancel was asked for, whether it dropped a run or not.
	cancelled []run.ID
	stopped   []run.ID
	// active is a run of an earlier process under way; interruptible says it can be stopped.
	active, interruptible bool
	interrupted           []run.ID
}

type submission struct {
	req      run.Request
	priority run.Priority
}

func newFakeRuns() *fakeRuns { return &fakeRuns{tickets: map[run.ID]run.Ticket{}} }

func (f *fakeRuns) Submit(_ context.Context, req run.Request, priority run.Priority) error {
	if _, known := f.tickets[req.ID]; known {
		return errors.New("a run is known already")
	}
	f.submitted = append(f.submitted, submission{req: req, priority: priority})
	f.tickets[req.ID] = run.Ticket{Command: req.Command, Digest: req.Digest, Priority: priority, Phase: run.PhaseWaiting}
	return nil
}

func (f *fakeRuns) Lookup(id run.ID) (run.Ticket, bool) {
	t, ok := f.tickets[id]
	return t, ok
}

func (f *fakeRuns) Take(id run.ID) (run.Ticket, bool) {
	t, ok := f.tickets[id]
	if !ok || t.Phase != run.PhaseDone {
		return run.Ticket{}, false
	}
	delete(f.tickets, id)
	return t, true
}

func (f *fakeRuns) Cancel(id run.ID) bool {
	f.cancelled = append(f.cancelled, id)
	if f.tickets[id].Phase == run.PhaseRunning {
		return false
	}
	delete(f.tickets, id)
	return true
}

func (f *fakeRuns) Stop(_ context.Context, id run.ID) (bool, error) {
	f.stopped = append(f.stopped, id)
	t, ok := f.tickets[id]
	if !ok || t.Phase != run.PhaseRunning {
		delete(f.tickets, id)
		return true, nil
	}
	t.Stopping = true
	f.tickets[id] = t
	return false, nil
}

func (f *fakeRuns) ForgetName(id run.ID) {
	for known := range f.tickets {
		if known.Namespace == id.Namespace && known.Name == id.Name {
			delete(f.tickets, known)
		}
	}
}

func (f *fakeRuns) Active(context.Context, run.ID) (bool, error) { return f.active, nil }

func (f *fakeRuns) Interrupt(_ context.Context, id run.ID) (bool, error) {
	f.interrupted = append(f.interrupted, id)
	return f.interruptible, nil
}

func (f *fakeRuns) Clean(context.Context, run.ID) error { return nil }

const testDigest = "0123456789abcdef"

// runsOperation is an operation on an Infrastructure of the local provider, whose secret
// exists, with runs as its pipeline.
func runsOperation(t *testing.T, runs *fakeRuns) *operation {
	t.Helper()
	infra := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "infra", UID: "uid-1"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"},
			Region:      "local-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: "shoot--p--s"},
		},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "cloudprovider"},
		Data:       map[string][]byte{"kubeconfig": []byte("apiVersion: v1\nkind: Config\n")},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	providers, err := templates.NewRegistry()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	a := &Actuator{Client: c, APIReader: c, Providers: providers, Runs: runs, DriftInterval: time.Hour}
	return a.operation(request{Object: infra})
}

func applyRequestOf(op *operation) run.Request {
	return run.Request{ID: op.objects().ID, Command: run.Apply, Digest: testDigest}
}

// pendingOf is the runPendingError of err, failing the test when it is none.
func pendingOf(g *WithT, err error) *runPendingError {
	var pending *runPendingError
	g.Expect(errors.As(err, &pending)).To(BeTrue(), "a run pending, not %v", err)
	return pending
}

// A run not known is prepared and submitted once; until it ends, the operation finds it
// waiting or under way and says so.
func TestRunIsSubmittedOnceAndPendingUntilItEnds(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	req := applyRequestOf(op)
	prepared := 0
	prepare := func(context.Context) error { prepared++; return nil }

	_, err := op.runOrWait(context.Background(), req, run.PriorityReconcile, prepare)
	g.Expect(pendingOf(g, err).Error()).To(Equal("waiting for a run slot (0 ahead)"))
	g.Expect(prepared).To(Equal(1))
	g.Expect(runs.submitted).To(HaveLen(1))
	g.Expect(runs.submitted[0].priority).To(Equal(run.PriorityReconcile))

	ticket := runs.tickets[req.ID]
	ticket.Ahead = 3
	runs.tickets[req.ID] = ticket
	_, err = op.runOrWait(context.Background(), req, run.PriorityReconcile, prepare)
	g.Expect(pendingOf(g, err).Error()).To(Equal("waiting for a run slot (3 ahead)"))

	ticket.Phase = run.PhaseRunning
	runs.tickets[req.ID] = ticket
	_, err = op.runOrWait(context.Background(), req, run.PriorityReconcile, prepare)
	g.Expect(pendingOf(g, err).Error()).To(Equal("the terraform apply is under way"))
	g.Expect(classify(err)).To(BeAssignableToTypeOf(&extension.Error{}))
	g.Expect(classify(err).(*extension.Error).RetryAfter).To(Equal(pendingRecheck))

	g.Expect(prepared).To(Equal(1), "what a run reads is written once, before it is submitted")
	g.Expect(runs.submitted).To(HaveLen(1))
}

// A run waiting for its account's budget says so.
func TestRunOverBudgetSaysWhatItWaitsFor(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	req := applyRequestOf(op)
	runs.tickets[req.ID] = run.Ticket{Command: run.Apply, Digest: testDigest, Phase: run.PhaseWaiting, OverBudget: true}
	_, err := op.runOrWait(context.Background(), req, run.PriorityReconcile, nil)
	g.Expect(pendingOf(g, err).Error()).To(HavePrefix("waiting for its cloud account's run budget"))
}

// The outcome of the request's run, once it ended, is taken, and nothing is submitted.
func TestFinishedRunsOutcomeIsTaken(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	req := applyRequestOf(op)
	outcome := &run.Result{State: []byte(`{"serial":3}`)}
	runs.tickets[req.ID] = run.Ticket{Command: run.Apply, Digest: testDigest, Phase: run.PhaseDone, Result: outcome}

	result, err := op.runOrWait(context.Background(), req, run.PriorityReconcile, func(context.Context) error {
		return errors.New("a finished run is not prepared again")
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(BeIdenticalTo(outcome))
	g.Expect(runs.tickets).NotTo(HaveKey(req.ID), "the outcome is taken")
	g.Expect(runs.submitted).To(BeEmpty())

	failed := errors.New("terraform failed")
	runs.tickets[req.ID] = run.Ticket{Command: run.Apply, Digest: testDigest, Phase: run.PhaseDone, Err: failed}
	_, err = op.runOrWait(context.Background(), req, run.PriorityReconcile, nil)
	g.Expect(err).To(MatchError(failed))
}

// A run of another command (or configuration) is dropped while it waits, and the
// request's run submitted in its place; the outcome of one that ended is forgotten.
func TestAnotherCommandsRunIsDroppedWhileItWaits(t *testing.T) {
	for _, phase := range []run.Phase{run.PhaseWaiting, run.PhaseDone} {
		t.Run(string(phase), func(t *testing.T) {
			g := NewWithT(t)
			runs := newFakeRuns()
			op := runsOperation(t, runs)
			req := applyRequestOf(op)
			runs.tickets[req.ID] = run.Ticket{Command: run.Plan, Priority: run.PriorityDrift, Phase: phase}

			_, err := op.runOrWait(context.Background(), req, run.PriorityReconcile, nil)
			g.Expect(pendingOf(g, err).other).To(BeFalse())
			g.Expect(runs.cancelled).To(ConsistOf(req.ID))
			g.Expect(runs.submitted).To(HaveLen(1))
			g.Expect(runs.submitted[0].req.Command).To(Equal(run.Apply))
			g.Expect(runs.tickets[req.ID].Command).To(Equal(run.Apply))
		})
	}
}

// A run of another command under way is waited for: nothing is prepared or submitted
// while it may read what prepare writes.
func TestAnotherCommandsRunIsWaitedForWhileItRuns(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	req := applyRequestOf(op)
	runs.tickets[req.ID] = run.Ticket{Command: run.Plan, Priority: run.PriorityDrift, Phase: run.PhaseRunning}

	_, err := op.runOrWait(context.Background(), req, run.PriorityReconcile, func(context.Context) error {
		return errors.New("nothing is prepared while another run is under way")
	})
	pending := pendingOf(g, err)
	g.Expect(pending.other).To(BeTrue())
	g.Expect(pending.Error()).To(Equal("waiting for the terraform plan under way to end"))
	g.Expect(runs.cancelled).To(BeEmpty(), "a run under way is not asked to be dropped")
	g.Expect(runs.submitted).To(BeEmpty())

	// The apply of an earlier configuration is another run too.
	runs.tickets[req.ID] = run.Ticket{Command: run.Apply, Digest: "fedcba9876543210", Phase: run.PhaseRunning}
	_, err = op.runOrWait(context.Background(), req, run.PriorityReconcile, nil)
	g.Expect(pendingOf(g, err).Error()).To(Equal("waiting for the terraform apply under way to end"))
	g.Expect(runs.submitted).To(BeEmpty())
}

// settle drops a waiting run, waits for one under way, and for one an earlier process
// started.
func TestSettleDropsAWaitingRunAndWaitsForARunningOne(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	id := op.objects().ID

	g.Expect(op.settle(context.Background())).To(Succeed(), "no run known")

	runs.tickets[id] = run.Ticket{Command: run.Plan, Phase: run.PhaseWaiting}
	g.Expect(op.settle(context.Background())).To(Succeed())
	g.Expect(runs.cancelled).To(ConsistOf(id))
	g.Expect(runs.tickets).To(BeEmpty())

	runs.tickets[id] = run.Ticket{Command: run.Apply, Digest: testDigest, Phase: run.PhaseRunning}
	err := op.settle(context.Background())
	g.Expect(pendingOf(g, err).Error()).To(Equal("waiting for the terraform apply under way to end"))
	g.Expect(runs.tickets).To(HaveKey(id), "a run under way is not dropped")

	delete(runs.tickets, id)
	runs.active = true
	err = op.settle(context.Background())
	g.Expect(pendingOf(g, err).Error()).To(Equal("waiting for the terraform run an earlier controller process started to end"))
	g.Expect(classify(err).(*extension.Error).RetryAfter).To(Equal(retryAfterRunInProgress))
	g.Expect(runs.interrupted).To(BeEmpty(), "settle stops nothing")
}

// A forced deletion stops the run under way, also one an earlier process started, and
// waits until it ended.
func TestForcedDeletionStopsTheRunUnderWay(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	id := op.objects().ID

	runs.tickets[id] = run.Ticket{Command: run.Apply, Digest: testDigest, Phase: run.PhaseRunning}
	err := op.endRuns(context.Background(), "", true)
	g.Expect(pendingOf(g, err).Error()).To(Equal("stopping the terraform apply under way; its state is saved first"))
	g.Expect(runs.stopped).To(ConsistOf(id))

	delete(runs.tickets, id)
	runs.active, runs.interruptible = true, true
	err = op.endRuns(context.Background(), "", true)
	g.Expect(pendingOf(g, err).Error()).To(Equal("stopping the terraform run an earlier controller process started; its state is saved first"))
	g.Expect(runs.interrupted).To(ConsistOf(id))
}

// A drift check submits a plan at drift priority, in the background, and reads its
// outcome into the InfrastructureInSync condition once it ended.
func TestDriftPlanIsSubmittedAtDriftPriorityAndItsOutcomeRead(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	id := op.objects().ID

	_, err := op.plan(context.Background())
	pendingOf(g, err)
	g.Expect(runs.submitted).To(HaveLen(1))
	submitted := runs.submitted[0]
	g.Expect(submitted.priority).To(Equal(run.PriorityDrift))
	g.Expect(submitted.req.Command).To(Equal(run.Plan))
	g.Expect(submitted.req.Background).To(BeTrue())
	g.Expect(submitted.req.Env).To(HaveKey("TF_VAR_kubeconfig"))

	// Known waiting, the check looks again later, whenever it is due.
	g.Expect(op.actuator.verify(context.Background(), op.req)).To(Equal(pendingRecheck))
	g.Expect(extension.FindCondition(op.status(), ConditionInSync)).To(BeNil())

	plan := &plan.Summary{Changes: []plan.Change{{Address: "kubectl_manifest.namespace", Type: "kubectl_manifest", Action: "update"}}}
	runs.tickets[id] = run.Ticket{Command: run.Plan, Priority: run.PriorityDrift, Phase: run.PhaseDone, Result: &run.Result{Plan: plan}}
	next := op.actuator.verify(context.Background(), op.req)
	g.Expect(next).To(BeNumerically(">", 0))
	g.Expect(runs.tickets).NotTo(HaveKey(id), "the plan's outcome is taken")
	inSync := extension.FindCondition(op.status(), ConditionInSync)
	g.Expect(inSync).NotTo(BeNil())
	g.Expect(inSync.Status).To(Equal(extensionsv1alpha1.ConditionFalse))
	g.Expect(inSync.Reason).To(Equal(ReasonDrifted))
	g.Expect(inSync.Message).To(ContainSubstring("kubectl_manifest.namespace"))
	g.Expect(runs.submitted).To(HaveLen(1), "the check that read the outcome submits nothing")
}

// A run waiting for a slot is looked at again as long after as it has waited, from
// pendingRecheck up to longestPendingRecheck: a seed's backlog of N runs costs each of
// them about log N looks, not N. A run under way is looked at every pendingRecheck.
func TestALongerWaitForASlotIsLookedAtLessOften(t *testing.T) {
	g := NewWithT(t)
	runs := newFakeRuns()
	op := runsOperation(t, runs)
	req := applyRequestOf(op)
	prepare := func(context.Context) error { return nil }
	_, err := op.runOrWait(context.Background(), req, run.PriorityReconcile, prepare)
	g.Expect(pendingOf(g, err).Error()).To(Equal("waiting for a run slot (0 ahead)"))

	recheckAfter := func(waited time.Duration, phase run.Phase) time.Duration {
		ticket := runs.tickets[req.ID]
		ticket.Submitted, ticket.Phase = time.Now().Add(-waited), phase
		runs.tickets[req.ID] = ticket
		_, err := op.runOrWait(context.Background(), req, run.PriorityReconcile, prepare)
		return classify(err).(*extension.Error).RetryAfter
	}
	g.Expect(recheckAfter(time.Second, run.PhaseWaiting)).To(Equal(pendingRecheck))
	g.Expect(recheckAfter(5*time.Minute, run.PhaseWaiting)).To(BeNumerically("~", 5*time.Minute, time.Second))
	g.Expect(recheckAfter(40*time.Minute, run.PhaseWaiting)).To(Equal(longestPendingRecheck))
	g.Expect(recheckAfter(40*time.Minute, run.PhaseRunning)).To(Equal(pendingRecheck), "under way")

	looks, waited := 0, time.Duration(0)
	for waited < time.Hour {
		waited += waitingRecheck(waited)
		looks++
	}
	g.Expect(looks).To(Equal(7), "2, 4, 8, 16, 32, 48, 64 min: not 30 looks an hour")
}
