package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/test/testenv"
)

// A run in a run pod is part of the trace of the reconcile that submitted it: the pod
// gets the run's trace context (TRACEPARENT) and the receiver's URL, and the terraformer
// process in it, started by the kubelet with the pod's environment, sends its spans, the
// terraform apply and the state saves, as children of the run's span; the executor adds
// the pod's creation, scheduling, start and end, and the reading of its result.
func TestARunPodsSpansJoinTheTraceOfItsReconcile(t *testing.T) {
	g := NewWithT(t)
	receiver, flush := testenv.StartTracing(t)
	f := newFixture(t, 2)
	startKubeletWith(f, kubeletOptions{nodes: &nodes{fit: true}})
	s := &Scheduler{Executor: f.podExecutor()}
	startScheduler(t, s)
	// The outcome is kept for this test to take, as a reconcile does.
	s.mu.Lock()
	s.Finished = nil
	s.mu.Unlock()

	ctx, reconcile := tracing.Start(context.Background(), "reconcile")
	req := f.request(run.Apply)
	g.Expect(s.Submit(ctx, req, run.PriorityCreate)).To(Succeed())
	reconcile.End()
	g.Eventually(func() run.Phase {
		ticket, _ := s.Lookup(req.ID)
		return ticket.Phase
	}).WithTimeout(2 * time.Minute).Should(Equal(run.PhaseDone))
	ticket, _ := s.Take(req.ID)
	g.Expect(ticket.Err).NotTo(HaveOccurred())
	g.Expect(f.Items(g)).To(HaveLen(2))
	g.Expect(flush(context.Background())).To(Succeed())

	traceID := reconcile.SpanContext().TraceID().String()
	t.Logf("the trace:\n%s", testenv.FormatTrace(receiver.Trace(traceID)))
	byName := map[string][]testenv.Span{}
	for _, span := range receiver.Trace(traceID) {
		byName[span.Name] = append(byName[span.Name], span)
	}
	one := func(name, parent string) testenv.Span {
		t.Helper()
		g.Expect(byName[name]).To(HaveLen(1), "%s in %v", name, keys(byName))
		g.Expect(byName[name][0].ParentSpanID).To(Equal(parent), "the parent of %s", name)
		return byName[name][0]
	}
	one("slot", reconcile.SpanContext().SpanID().String())
	runSpan := one("run", reconcile.SpanContext().SpanID().String())
	g.Expect(runSpan.SpanID).To(Equal(ticket.Trace.SpanID().String()), "the ticket names the run's span")
	g.Expect(runSpan.Attributes).To(HaveKeyWithValue("terraseed.executor", "pod"))
	for _, name := range []string{"pod.create", "pod.schedule", "pod.start", "pod.end", "run.result"} {
		one(name, runSpan.SpanID)
	}
	// The terraformer's spans, sent by its process.
	terraformerSpan := one("terraformer", runSpan.SpanID)
	g.Expect(terraformerSpan.Service).To(Equal("terraseed-terraformer"))
	one("terraform.init", terraformerSpan.SpanID)
	one("terraform.apply", terraformerSpan.SpanID)
	g.Expect(byName["state.save"]).NotTo(BeEmpty())
	for _, save := range byName["state.save"] {
		g.Expect(save.ParentSpanID).To(Equal(terraformerSpan.SpanID))
		g.Expect(save.Service).To(Equal("terraseed-terraformer"))
	}
}

// The span of a run's wait for its slot says why it waited: its account's budget, or
// the slots other runs held.
func TestTheSlotSpanSaysWhyTheRunWaited(t *testing.T) {
	g := NewWithT(t)
	receiver, flush := testenv.StartTracing(t)
	runs := newTimedRuns(200 * time.Millisecond)
	s := &Scheduler{Executor: runs, MaxRuns: 2, RunsPerAccount: 1}
	startScheduler(t, s)

	// a0 and b0 take both slots; a1 waits for a's budget, c0 for a slot.
	submitted := map[string]string{}
	for _, name := range []string{"a0", "a1", "b0", "c0"} {
		ctx, reconcile := tracing.Start(context.Background(), "reconcile")
		g.Expect(s.Submit(ctx, budgetRequest(name, name[:1], "p"), run.PriorityCreate)).To(Succeed())
		reconcile.End()
		submitted[name] = reconcile.SpanContext().TraceID().String()
	}
	g.Eventually(func() int { return len(runs.ended()) }).WithTimeout(10 * time.Second).Should(Equal(4))
	g.Expect(flush(context.Background())).To(Succeed())

	waitedFor := func(name string) string {
		for _, span := range receiver.Trace(submitted[name]) {
			if span.Name == "slot" {
				return span.Attributes["terraseed.slot.waited_for"]
			}
		}
		return "no slot span"
	}
	g.Expect(waitedFor("a0")).To(BeEmpty(), "it started at once")
	g.Expect(waitedFor("a1")).To(ContainSubstring("budget"))
	g.Expect(waitedFor("c0")).To(Equal("priority"))
}

func keys(m map[string][]testenv.Span) string {
	var names []string
	for name := range m {
		names = append(names, name)
	}
	return strings.Join(names, " ")
}
