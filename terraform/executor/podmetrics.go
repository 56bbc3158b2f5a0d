package executor

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/terraseed/terraseed/terraform/run/termination"
	"github.com/terraseed/terraseed/terraform/run/tracing"
)

// What a run pod costs besides terraform: the spans a run pod adds to a run, and the
// memory its container needed. The spans compare the executor's clock with the node's,
// which tells them apart by the clocks' skew at most.
var (
	podSpan = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "terraseed_run_pod_span_seconds",
		Help: "Spans of a run pod outside terraform: created_to_terraformer (the pod's create request until its terraformer started: scheduling, sandbox, image, container), " +
			"terraformer_to_terraform (until the terraformer started terraform: reading the run objects, writing the working directory), " +
			"ended_to_outcome (the terraformer's exit until the executor read the outcome: the kubelet's report, the watch, the cleanup and the state read).",
		Buckets: prometheus.ExponentialBuckets(0.025, 2, 12),
	}, []string{"span"})
	podPeakMemory = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "terraseed_run_pod_peak_memory_bytes",
		Help:    "The most memory a run pod's container used, terraform and its providers included, as its cgroup tells.",
		Buckets: prometheus.ExponentialBuckets(16<<20, 2, 9),
	})
)

// Values of the span label.
const (
	spanToTerraformer = "created_to_terraformer"
	spanToTerraform   = "terraformer_to_terraform"
	spanToOutcome     = "ended_to_outcome"
)

func init() {
	metrics.Registry.MustRegister(podSpan, podPeakMemory)
}

// observePodRun records the spans of a run pod that ended, from the termination message
// its terraformer left: created is when the executor asked for the pod (zero for a pod it
// adopted, whose creation it did not see), read when it had read the outcome.
func observePodRun(message string, created, read time.Time) {
	record, ok := termination.ParseRecord(message)
	if !ok {
		return
	}
	if !created.IsZero() && !record.Started.IsZero() {
		podSpan.WithLabelValues(spanToTerraformer).Observe(max(record.Started.Sub(created), 0).Seconds())
	}
	if !record.TerraformStarted.IsZero() {
		podSpan.WithLabelValues(spanToTerraform).Observe(max(record.TerraformStarted.Sub(record.Started), 0).Seconds())
	}
	if !record.Ended.IsZero() {
		podSpan.WithLabelValues(spanToOutcome).Observe(max(read.Sub(record.Ended), 0).Seconds())
	}
	if record.PeakMemory > 0 {
		podPeakMemory.Observe(float64(record.PeakMemory))
	}
}

// tracePodRun records the spans of a run pod that ended, as observePodRun its metrics:
// from the time it was asked for (created, zero for an adopted pod) until its node was
// chosen (pod.schedule), until its terraformer started (pod.start: sandbox, image,
// container), and from the terraformer's exit until its outcome was read (pod.end). The
// pod's own times have seconds only: a span never starts before the one it follows ends.
func tracePodRun(ctx context.Context, pod *corev1.Pod, created, read time.Time) {
	if !tracing.Enabled() {
		return
	}
	record, _ := termination.ParseRecord(terminationMessageOf(pod))
	since := created
	if since.IsZero() {
		since = pod.CreationTimestamp.Time
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			scheduled := latest(since, c.LastTransitionTime.Time)
			tracing.Record(ctx, "pod.schedule", since, scheduled, attribute.String("k8s.node.name", pod.Spec.NodeName))
			since = scheduled
		}
	}
	if !record.Started.IsZero() {
		started := latest(since, record.Started)
		tracing.Record(ctx, "pod.start", since, started)
	}
	if !record.Ended.IsZero() {
		tracing.Record(ctx, "pod.end", latest(since, record.Ended), read)
	}
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
