package infrastructure

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/terraformer"
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
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terraseed_terraform_phase_duration_seconds",
		Help:    "Duration of the terraform commands of a run (init, then apply, destroy, plan or validate) by the run's command and result.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 16),
	}, []string{"command", "phase", "result"})
	runsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "terraseed_terraform_runs_in_flight",
		Help: "Terraform runs under way.",
	})
	runsWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terraseed_terraform_runs_waiting",
		Help: "Terraform runs waiting for a run slot, by priority (delete, create, reconcile, drift).",
	}, []string{"priority"})
)

func init() {
	metrics.Registry.MustRegister(runDuration, runsTotal, phaseDuration, runsInFlight, runsWaiting)
}

// measured is an executor whose runs are measured.
type measured struct{ executor.Executor }

func (m measured) Run(ctx context.Context, req executor.Request) (*terraformer.Result, error) {
	runsInFlight.Inc()
	defer runsInFlight.Dec()
	start := time.Now()
	result, err := m.Executor.Run(ctx, req)
	outcome := "succeeded"
	var phases terraformer.Phases
	var runErr *terraformer.RunError
	switch {
	case err == nil:
		phases = result.Phases
	case errors.As(err, &runErr):
		outcome, phases = "failed", runErr.Phases
	default:
		outcome = "failed"
	}
	runDuration.WithLabelValues(string(req.Command), outcome).Observe(time.Since(start).Seconds())
	runsTotal.WithLabelValues(string(req.Command), outcome).Inc()
	for phase, d := range phases {
		phaseDuration.WithLabelValues(string(req.Command), phase, outcome).Observe(d.Seconds())
	}
	return result, err
}
