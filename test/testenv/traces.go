package testenv

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/terraseed/terraseed/terraform/run/tracing"
)

// Span is a span as an OTLP receiver got it, its IDs in hex as W3C trace context writes them.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Service is the service.name of the process that sent it.
	Service    string
	Attributes map[string]string
	// Links are the span IDs it links to.
	Links      []string
	Start, End time.Time
}

// TraceReceiver is an OTLP/HTTP receiver of traces: it accepts POST /v1/traces with a
// protobuf ExportTraceServiceRequest, gzip-compressed or not, as OpenTelemetry's exporters
// send it, and keeps the spans.
type TraceReceiver struct {
	// URL is the base URL that OTEL_EXPORTER_OTLP_ENDPOINT and --tracing-endpoint take.
	URL string

	mu    sync.Mutex
	spans []Span
}

// StartTracing sends this process's spans to a new TraceReceiver until the test ends, in
// batches every 100 ms rather than every 5 s, and returns it with the flush that sends
// what is batched. The standard endpoint variables are cleared: the receiver is the one.
func StartTracing(t *testing.T) (*TraceReceiver, func(context.Context) error) {
	t.Helper()
	receiver := StartTraceReceiver(t)
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	flush, err := tracing.Setup(context.Background(), "terraseed", receiver.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flush(context.Background()) })
	return receiver, flush
}

// StartTraceReceiver serves a TraceReceiver on 127.0.0.1 until the test ends.
func StartTraceReceiver(t testing.TB) *TraceReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ServeTraceReceiver(t, l)
}

// ServeTraceReceiver serves a TraceReceiver on l until the test ends: a listener on an
// address pods reach, for the traces of run pods on a real node.
func ServeTraceReceiver(t testing.TB, l net.Listener) *TraceReceiver {
	t.Helper()
	r := &TraceReceiver{}
	server := httptest.NewUnstartedServer(http.HandlerFunc(r.export))
	server.Listener = l
	server.Start()
	t.Cleanup(server.Close)
	r.URL = server.URL
	return r
}

func (r *TraceReceiver) export(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	export := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(data, export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var spans []Span
	for _, rs := range export.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				span := Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Service: service,
					Attributes: attributes(s.GetAttributes()),
					Start:      time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
				}
				for _, link := range s.GetLinks() {
					span.Links = append(span.Links, hex.EncodeToString(link.GetSpanId()))
				}
				spans = append(spans, span)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	response, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(response)
}

// attributes are the values of kvs as text; a list's values joined by commas.
func attributes(kvs []*commonv1.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.GetKey()] = text(kv.GetValue())
	}
	return out
}

func text(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonv1.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonv1.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonv1.AnyValue_ArrayValue:
		values := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, item := range x.ArrayValue.GetValues() {
			values = append(values, text(item))
		}
		return strings.Join(values, ",")
	}
	return ""
}

// Spans are the spans received so far.
func (r *TraceReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Trace is the spans of one trace received so far.
func (r *TraceReceiver) Trace(traceID string) []Span {
	var spans []Span
	for _, s := range r.Spans() {
		if s.TraceID == traceID {
			spans = append(spans, s)
		}
	}
	return spans
}

// FormatTrace shows spans as a tree, each child below its parent in the order they
// started, with its start after the root's and its duration.
func FormatTrace(spans []Span) string {
	sorted := slices.Clone(spans)
	slices.SortFunc(sorted, func(a, b Span) int { return a.Start.Compare(b.Start) })
	children := map[string][]Span{}
	known := map[string]bool{}
	for _, s := range sorted {
		known[s.SpanID] = true
	}
	var roots []Span
	for _, s := range sorted {
		if known[s.ParentSpanID] {
			children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var show func(s Span, depth int, origin time.Time)
	show = func(s Span, depth int, origin time.Time) {
		fmt.Fprintf(&b, "%-40s +%-8s %8s  %s\n", strings.Repeat("  ", depth)+s.Name, s.Start.Sub(origin).Round(time.Millisecond), s.End.Sub(s.Start).Round(time.Millisecond), s.Service)
		for _, c := range children[s.SpanID] {
			show(c, depth+1, origin)
		}
	}
	for _, r := range roots {
		show(r, 0, r.Start)
	}
	return b.String()
}
