package executor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/terraseed/terraseed/terraform/run"
)

// The metrics of the runs of a Pipeline: how long they take, how many run and wait, and
// how the budgets of the cloud accounts stand.
var (
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terraseed_terraform_run_duration_seconds",
		Help:    "Duration of terraform runs by the kind of their object (infrastructure, dnsrecord, ...), command and result.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"kind", "command", "result"})
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terraseed_terraform_runs_total",
		Help: "Terraform runs by the kind of their object (infrastructure, dnsrecord, ...), command and result.",
	}, []string{"kind", "command", "result"})
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terraseed_terraform_phase_duration_seconds",
		Help:    "Duration of the terraform commands of a run (init, then apply, destroy, plan or validate) by the kind of its object, the run's command and result.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 16),
	}, []string{"kind", "command", "phase", "result"})
	runsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "terraseed_terraform_runs_in_flight",
		Help: "Terraform runs under way.",
	})
	runsWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terraseed_terraform_runs_waiting",
		Help: "Terraform runs waiting for a run slot, by priority (delete, create, reconcile, drift).",
	}, []string{"priority"})
	budgetRuns = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terraseed_terraform_budget_runs",
		Help: "Terraform runs of one set of cloud credentials by state (running, waiting); budget is a keyed digest of the credentials, never a credential.",
	}, []string{"budget", "state"})
	budgetSlots = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terraseed_terraform_budget_slots",
		Help: "Terraform runs one set of cloud credentials may have under way now: runsPerAccount, fewer while it backs off after the cloud throttled it.",
	}, []string{"budget"})
	throttledRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terraseed_terraform_throttled_runs_total",
		Help: "Terraform runs that failed because the cloud throttled the calls of their credentials.",
	}, []string{"budget"})
)

func init() {
	metrics.Registry.MustRegister(runDuration, runsTotal, phaseDuration, runsInFlight, runsWaiting, budgetRuns, budgetSlots, throttledRuns)
}

// Pipeline is the run path of a controller: its executor, measured, behind a Scheduler
// that the manager starts (it is a manager.Runnable); the ends of its runs are a source
// of reconciles of the runs' objects (Ends).
type Pipeline struct {
	*Scheduler
	executor Executor

	mu sync.Mutex
	// ends are the queues of the controllers of each purpose's runs (Ends).
	ends map[run.Purpose]endsQueue
}

// endsQueue is the queue of the controller of one purpose's runs.
type endsQueue struct {
	queue         workqueue.TypedRateLimitingInterface[reconcile.Request]
	clusterScoped bool
}

// NewPipeline runs e's runs with the scheduler's settings of cfg (MaxRuns, DriftShare,
// DriftAging, RunsPerAccount).
func NewPipeline(e Executor, cfg Config, hooks run.Hooks) *Pipeline {
	p := &Pipeline{executor: e}
	p.Scheduler = &Scheduler{
		Executor:       measured{Executor: e, ended: hooks.Ended},
		MaxRuns:        cfg.MaxRuns,
		DriftShare:     cfg.DriftShare,
		DriftAging:     cfg.DriftAging,
		RunsPerAccount: cfg.RunsPerAccount,
		Waiting:        runsWaiting,
		Finished:       p.finished,
		Throttled:      hooks.Throttled,
		BudgetRuns:     budgetRuns,
		BudgetSlots:    budgetSlots,
		Throttles:      throttledRuns,
	}
	return p
}

// Ends is the source of a reconcile of the object of each run of purpose whose outcome
// can be read, for the controller of the kind whose runs have that purpose: one pipeline
// serves the runs of every kind, whose objects are named as their runs. The runs of a
// cluster-scoped kind's objects are kept in a namespace of the controller's, and their
// objects are in none (clusterScoped).
func (p *Pipeline) Ends(purpose run.Purpose, clusterScoped bool) source.Source {
	return source.Func(func(_ context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ends == nil {
			p.ends = map[run.Purpose]endsQueue{}
		}
		p.ends[purpose] = endsQueue{queue: queue, clusterScoped: clusterScoped}
		return nil
	})
}

func (p *Pipeline) finished(id run.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Before the controller started, its first list reconciles every object anyway.
	ends, ok := p.ends[id.Purpose]
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: id.Namespace, Name: id.Name}
	if ends.clusterScoped {
		key.Namespace = ""
	}
	req := reconcile.Request{NamespacedName: key}
	if queue, ok := ends.queue.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		priority := PriorityRunEnded
		queue.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
		return
	}
	ends.queue.Add(req)
}

// PriorityRunEnded is the work-queue priority of the reconcile that reads a run's outcome:
// it finishes an operation someone waits for (gardenlet, for the object's last operation),
// and goes ahead of the objects a burst created, which come at the default priority, 0.
// There are never more of them than runs end.
const PriorityRunEnded = 10

// Active says whether a run of id is under way in the executor, also one an earlier
// process started; false when the executor cannot tell.
func (p *Pipeline) Active(ctx context.Context, id run.ID) (bool, error) {
	checker, ok := p.executor.(activityChecker)
	if !ok {
		return false, nil
	}
	return checker.Active(ctx, id)
}

// Interrupt asks the executor to stop the run of id under way, also one an earlier
// process started (see stopper); false when its runs cannot be stopped from here.
func (p *Pipeline) Interrupt(ctx context.Context, id run.ID) (bool, error) {
	stopper, ok := p.executor.(stopper)
	if !ok {
		return false, nil
	}
	return true, stopper.Stop(ctx, id)
}

// Clean removes what the executor keeps of the runs of id beyond the run objects (see
// cleaner), once its object is gone.
func (p *Pipeline) Clean(ctx context.Context, id run.ID) error {
	if cleaner, ok := p.executor.(cleaner); ok {
		return cleaner.Clean(ctx, id)
	}
	return nil
}

// measured is an executor whose runs are measured.
type measured struct {
	Executor
	ended func(run.Request, error)
}

// Stop stops a run of an executor whose runs go on elsewhere.
func (m measured) Stop(ctx context.Context, id run.ID) error {
	if stopper, ok := m.Executor.(stopper); ok {
		return stopper.Stop(ctx, id)
	}
	return nil
}

func (m measured) Run(ctx context.Context, req run.Request) (*run.Result, error) {
	runsInFlight.Inc()
	defer runsInFlight.Dec()
	start := time.Now()
	result, err := m.Executor.Run(ctx, req)
	outcome := "succeeded"
	var phases run.Phases
	var runErr *run.Error
	switch {
	case err == nil:
		phases = result.Phases
	case errors.As(err, &runErr):
		outcome, phases = "failed", runErr.Phases
	default:
		outcome = "failed"
	}
	kind := req.ID.Purpose.Kind()
	runDuration.WithLabelValues(kind, string(req.Command), outcome).Observe(time.Since(start).Seconds())
	runsTotal.WithLabelValues(kind, string(req.Command), outcome).Inc()
	for phase, d := range phases {
		phaseDuration.WithLabelValues(kind, string(req.Command), phase, outcome).Observe(d.Seconds())
	}
	// A run stopped with the controller or dropped by the scheduler did not end on its own.
	if ctx.Err() == nil && m.ended != nil {
		m.ended(req, err)
	}
	return result, err
}
