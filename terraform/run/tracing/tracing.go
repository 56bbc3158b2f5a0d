package tracing

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The environment that turns tracing on and carries a trace into another process.
const (
	// EnvEndpoint is OpenTelemetry's base URL of an OTLP receiver; /v1/traces is appended.
	EnvEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
	// EnvTracesEndpoint is OpenTelemetry's full URL of an OTLP receiver's traces.
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	// EnvTraceParent is the W3C traceparent of the span a process's spans join.
	EnvTraceParent = "TRACEPARENT"
)

const instrumentation = "github.com/terraseed/terraseed"

var (
	// enabled is set while an exporter is installed: spans are started only then, so that
	// tracing off costs a load of this flag.
	enabled atomic.Bool

	mu sync.Mutex
	// tracesURL is where the installed exporter sends, handed on to run pods.
	tracesURL string
)

// noSpan is what Start returns while tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// Endpoint is the URL of the traces of an OTLP/HTTP receiver: endpoint, the base URL a
// flag names, when set; else what the OTEL_EXPORTER_OTLP_* variables name; "" when none
// does, and tracing stays off.
func Endpoint(endpoint string) string {
	switch {
	case endpoint != "":
		return strings.TrimRight(endpoint, "/") + "/v1/traces"
	case os.Getenv(EnvTracesEndpoint) != "":
		return os.Getenv(EnvTracesEndpoint)
	case os.Getenv(EnvEndpoint) != "":
		return strings.TrimRight(os.Getenv(EnvEndpoint), "/") + "/v1/traces"
	}
	return ""
}

// Setup turns tracing on when Endpoint(endpoint) names a receiver: an OTLP/HTTP exporter,
// batched, becomes the global tracer provider, with the W3C trace context as propagator.
// The other OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression, TLS) are read
// by the exporter itself. With no receiver nothing is created and the global no-op
// provider stays. The returned function flushes what was not sent yet and turns tracing
// off again; a process calls it before it exits.
func Setup(ctx context.Context, service, endpoint string) (func(context.Context) error, error) {
	url := Endpoint(endpoint)
	if url == "" {
		return func(context.Context) error { return nil }, nil
	}
	var options []otlptracehttp.Option
	if endpoint != "" {
		options = append(options, otlptracehttp.WithEndpointURL(url))
	}
	exporter, err := otlptracehttp.New(ctx, options...)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return nil, errors.Join(err, exporter.Shutdown(ctx))
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	mu.Lock()
	tracesURL = url
	mu.Unlock()
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
	return func(ctx context.Context) error {
		enabled.Store(false)
		otel.SetTracerProvider(noop.NewTracerProvider())
		mu.Lock()
		tracesURL = ""
		mu.Unlock()
		return provider.Shutdown(ctx)
	}, nil
}

// Enabled says whether spans are recorded and sent.
func Enabled() bool { return enabled.Load() }

// Start starts a span as a child of ctx's; while tracing is off it returns ctx and a span
// that records nothing, allocating nothing.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	// A copy, so that attrs does not escape and costs callers nothing while tracing is off.
	return otel.Tracer(instrumentation).Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

// Set adds attrs to span when it records them; free while tracing is off, as Start.
func Set(span trace.Span, attrs ...attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(slices.Clone(attrs)...)
	}
}

// Record records a span of ctx's trace that started and ended before: one another
// process or the API server timed.
func Record(ctx context.Context, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if !enabled.Load() {
		return
	}
	_, span := otel.Tracer(instrumentation).Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(slices.Clone(attrs)...))
	span.End(trace.WithTimestamp(end))
}

// Fail marks span failed with err, when there is one.
func Fail(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// WithParent is ctx with parent, a span of another goroutine or process, as the parent of
// the spans started from it; ctx when parent is no span, as while tracing is off.
func WithParent(ctx context.Context, parent trace.SpanContext) context.Context {
	if !parent.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, parent)
}

// TraceID is the ID of ctx's trace, "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceParent is the W3C traceparent of ctx's span, "" when there is none.
func TraceParent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// Env is the environment that makes another process's spans join ctx's span and go to
// the same receiver: TRACEPARENT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and the protocol,
// OTLP/HTTP; nil while tracing is off. The receiver's headers are not handed on: they would stand in a pod's spec.
func Env(ctx context.Context) []string {
	if !enabled.Load() {
		return nil
	}
	mu.Lock()
	url := tracesURL
	mu.Unlock()
	// The protocol is told: OpenTofu's exporter speaks gRPC unless told otherwise.
	env := []string{EnvTracesEndpoint + "=" + url, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
	if parent := TraceParent(ctx); parent != "" {
		env = append(env, EnvTraceParent+"="+parent)
	}
	return env
}

// FromEnv is ctx with the span of the TRACEPARENT variable as its parent, so that this
// process's spans join the trace of the process that started it; ctx when there is none.
func FromEnv(ctx context.Context) context.Context {
	parent := os.Getenv(EnvTraceParent)
	if parent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": parent})
}
