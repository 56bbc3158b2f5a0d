package infrastructure

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/terraseed/terraseed/terraform"
)

var (
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terraseed_terraform_run_duration_seconds",
		Help:    "Duration of terraform runs by command and result.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"command", "result"})
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terraseed_terraform_runs_total",
		Help: "Terraform runs by command and result.",
	}, []string{"command", "result"})
	runsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "terraseed_terraform_runs_in_flight",
		Help: "Terraform runs under way.",
	})
)

func init() {
	metrics.Registry.MustRegister(runDuration, runsTotal, runsInFlight)
}

// run runs terraform through the executor, measuring it.
func (r *Reconciler) run(ctx context.Context, req terraform.Request) (*terraform.Result, error) {
	runsInFlight.Inc()
	defer runsInFlight.Dec()
	start := time.Now()
	result, err := r.Executor.Run(ctx, req)
	outcome := "succeeded"
	if err != nil {
		outcome = "failed"
	}
	runDuration.WithLabelValues(string(req.Command), outcome).Observe(time.Since(start).Seconds())
	runsTotal.WithLabelValues(string(req.Command), outcome).Inc()
	return result, err
}
