package kinds_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/test/testenv"
)

// A create with tracing on, the local executor running terraform: the event of the
// create's start names its trace, whose spans an OTLP/HTTP receiver got: the reconcile
// that submitted the run, the wait for its slot, the run, the terraformer's part, the
// terraform apply and the state saves, each the child of the one it belongs to. The
// reconcile's log lines carry the trace ID, and the reconcile that reads the run's outcome
// links its own trace to the run.
func TestACreateIsOneTraceFromTheReconcileToTheStateSaves(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	receiver, flush := testenv.StartTracing(t)

	logs := &testenv.SyncBuffer{}
	log := funcr.New(func(prefix, args string) { _, _ = logs.Write([]byte(prefix + " " + args + "\n")) }, funcr.Options{})
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startControllerLogging(t, s.namespace, workDir(t), env.Config, 2, log)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	// The event of the create's start names the trace; lastOperation says nothing of it.
	var traceID string
	g.Eventually(func(g Gomega) {
		traceID = traceOfEvent(g, s.namespace, s.infra.Name, "CreateProcessing")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(s.get(g).Status.LastOperation.Description).NotTo(ContainSubstring(traceID))
	g.Expect(logs.String()).To(ContainSubstring(`"traceID"="` + traceID + `"`))

	g.Expect(flush(ctx)).To(Succeed(), "every span sent")
	spans := receiver.Trace(traceID)
	t.Logf("the trace:\n%s", testenv.FormatTrace(spans))
	byName := map[string][]testenv.Span{}
	for _, span := range spans {
		byName[span.Name] = append(byName[span.Name], span)
	}
	g.Expect(byName).To(HaveKey("reconcile"))
	reconcile := byName["reconcile"][0]
	g.Expect(reconcile.ParentSpanID).To(BeEmpty(), "the reconcile is the trace's root")
	g.Expect(reconcile.Attributes).To(And(HaveKeyWithValue("terraseed.kind", "Infrastructure"), HaveKeyWithValue("terraseed.operation", "Create"),
		HaveKeyWithValue("terraseed.name", s.infra.Name)))
	one := func(name, parent string) testenv.Span {
		t.Helper()
		g.Expect(byName[name]).To(HaveLen(1), "%s in %v", name, names(spans))
		g.Expect(byName[name][0].ParentSpanID).To(Equal(parent), "the parent of %s", name)
		return byName[name][0]
	}
	one("render", reconcile.SpanID)
	slot := one("slot", reconcile.SpanID)
	g.Expect(slot.Attributes).To(And(HaveKeyWithValue("terraseed.command", "apply"), HaveKeyWithValue("terraseed.priority", "create")))
	runSpan := one("run", reconcile.SpanID)
	g.Expect(runSpan.Attributes).To(HaveKeyWithValue("terraseed.executor", "local"))
	terraformerSpan := one("terraformer", runSpan.SpanID)
	one("terraform.init", terraformerSpan.SpanID)
	one("terraform.apply", terraformerSpan.SpanID)
	g.Expect(byName["state.save"]).NotTo(BeEmpty())
	for _, save := range byName["state.save"] {
		g.Expect(save.ParentSpanID).To(Equal(terraformerSpan.SpanID))
		g.Expect(save.Attributes).To(HaveKey("terraseed.state.bytes"))
	}
	g.Expect(byName["state.save"]).To(ContainElement(HaveField("Attributes", And(HaveKeyWithValue("terraseed.state.written", "true"), HaveKeyWithValue("terraseed.state.parts", "1")))))
	g.Expect(byName["status"]).To(ContainElement(HaveField("ParentSpanID", reconcile.SpanID)), "the status write")

	// The reconcile after the run's end reads its outcome in a trace of its own, linked
	// to the run.
	var result testenv.Span
	for _, span := range receiver.Spans() {
		if span.Name == "result" {
			result = span
		}
	}
	t.Logf("the trace of the result:\n%s", testenv.FormatTrace(receiver.Trace(result.TraceID)))
	g.Expect(result.Links).To(ContainElement(runSpan.SpanID))
	g.Expect(result.TraceID).NotTo(Equal(traceID))
}

// traceOfEvent is the trace ID an event of the object names.
func traceOfEvent(g Gomega, namespace, name, reason string) string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(namespace))).To(Succeed())
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			m := traceInNote.FindStringSubmatch(e.Note)
			g.Expect(m).NotTo(BeNil(), "the event names the trace: %q", e.Note)
			return m[1]
		}
	}
	g.Expect(reason).To(BeEmpty(), "no event %s", reason)
	return ""
}

var traceInNote = regexp.MustCompile(`\(trace ([0-9a-f]{32})\)$`)

func names(spans []testenv.Span) string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return strings.Join(out, " ")
}

// With OpenTofu, terraform itself traces into the run's trace: OpenTofu's own spans
// arrive as children of the terraformer's.
func TestOpenTofusSpansJoinTheRunsTrace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tofu := testenv.OpenTofu(t)
	receiver, flush := testenv.StartTracing(t)

	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) {
		e := a.Executor.(*executor.LocalExecutor)
		e.Settings.Terraform, e.Settings.OpenTofu = tofu, true
	})
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	var traceID string
	g.Eventually(func(g Gomega) {
		traceID = traceOfEvent(g, s.namespace, s.infra.Name, "CreateProcessing")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(flush(ctx)).To(Succeed())

	spans := receiver.Trace(traceID)
	t.Logf("the trace:\n%s", testenv.FormatTrace(spans))
	var terraformerSpans []string
	for _, span := range spans {
		if span.Name == "terraformer" {
			terraformerSpans = append(terraformerSpans, span.SpanID)
		}
	}
	g.Expect(terraformerSpans).To(HaveLen(1))
	g.Eventually(func() []testenv.Span { return receiver.Trace(traceID) }).WithTimeout(10*time.Second).Should(ContainElement(And(
		HaveField("Service", Not(Equal("terraseed"))), HaveField("ParentSpanID", terraformerSpans[0]))), "OpenTofu's spans: %v", receiver.Spans())
}
