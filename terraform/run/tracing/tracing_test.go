package tracing_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/test/testenv"
)

// Without an endpoint nothing of tracing is made: the global provider stays the no-op
// one, no exporter or batcher starts a goroutine, a span records nothing and costs no
// allocation, and nothing is handed to a run pod.
var errFailed = errors.New("failed")

func TestOffWithoutAnEndpoint(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	ctx := context.Background()

	goroutines := runtime.NumGoroutine()
	flush, err := tracing.Setup(ctx, "terraseed", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tracing.Enabled()).To(BeFalse())
	_, sdk := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	g.Expect(sdk).To(BeFalse(), "the global provider is the no-op one")
	g.Expect(runtime.NumGoroutine()).To(Equal(goroutines), "no exporter, no batcher")

	spanCtx, span := tracing.Start(ctx, "reconcile", attribute.String("terraseed.kind", "Infrastructure"))
	g.Expect(span.IsRecording()).To(BeFalse())
	g.Expect(span.SpanContext().IsValid()).To(BeFalse())
	g.Expect(tracing.TraceID(spanCtx)).To(BeEmpty())
	g.Expect(tracing.Env(spanCtx)).To(BeNil(), "nothing for a run pod")
	allocs := testing.AllocsPerRun(100, func() {
		ctx, span := tracing.Start(tracing.WithParent(ctx, span.SpanContext()), "slot", attribute.String("terraseed.command", "apply"), attribute.Int("terraseed.slot.ahead", 3))
		tracing.Set(span, attribute.Bool("terraseed.state.written", true))
		tracing.Fail(span, errFailed)
		tracing.Record(ctx, "pod.start", time.Time{}, time.Time{})
		span.End()
		_ = ctx
	})
	g.Expect(allocs).To(BeZero())
	g.Expect(flush(ctx)).To(Succeed())
}

// With an endpoint, spans go to the OTLP/HTTP receiver there; another process joins the
// trace from the environment Env hands it (TRACEPARENT), as a run pod's terraformer does.
func TestOnSendsToTheReceiverAndAnotherProcessJoins(t *testing.T) {
	g := NewWithT(t)
	receiver := testenv.StartTraceReceiver(t)
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	ctx := context.Background()

	flush, err := tracing.Setup(ctx, "terraseed", receiver.URL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tracing.Enabled()).To(BeTrue())
	runCtx, run := tracing.Start(ctx, "run")
	env := tracing.Env(runCtx)
	g.Expect(env).To(ConsistOf(tracing.EnvTracesEndpoint+"="+receiver.URL+"/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", HavePrefix(tracing.EnvTraceParent+"=00-"+tracing.TraceID(runCtx)+"-")))
	run.End()

	// The other process, here: TRACEPARENT in its environment.
	for _, kv := range env {
		if name, value, _ := strings.Cut(kv, "="); name == tracing.EnvTraceParent {
			t.Setenv(name, value)
		}
	}
	_, child := tracing.Start(tracing.FromEnv(context.Background()), "terraformer")
	child.End()
	g.Expect(flush(ctx)).To(Succeed())
	g.Expect(tracing.Enabled()).To(BeFalse(), "off again once flushed")

	g.Eventually(receiver.Spans).WithTimeout(10 * time.Second).Should(ConsistOf(
		And(HaveField("Name", "run"), HaveField("Service", "terraseed"), HaveField("SpanID", run.SpanContext().SpanID().String())),
		And(HaveField("Name", "terraformer"), HaveField("TraceID", run.SpanContext().TraceID().String()), HaveField("ParentSpanID", run.SpanContext().SpanID().String())),
	))
}
