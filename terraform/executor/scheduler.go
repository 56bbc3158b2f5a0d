package executor

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/terraform/state"
)

// priorities is the number of run priorities.
const priorities = int(run.PriorityDrift) + 1

// DefaultMaxRuns bounds the runs under way when Scheduler.MaxRuns is zero.
const DefaultMaxRuns = 5

// NotStartedRetry is how long a run that could not start (notStartedError) waits before
// it starts again, holding no run slot meanwhile.
var NotStartedRetry = 10 * time.Second

// DefaultDriftShare is the share of the run slots drift plans may take at once when
// Scheduler.DriftShare is zero.
const DefaultDriftShare = 0.2

// DefaultDriftAging is how long a drift plan waits before it ranks ahead of reconciles
// when Scheduler.DriftAging is zero.
const DefaultDriftAging = 10 * time.Minute

// Defaults of the pause a throttled account's runs take, when the Scheduler's fields are zero.
const (
	defaultThrottlePause    = 15 * time.Second
	defaultMaxThrottlePause = 5 * time.Minute
)

// Scheduler runs requests on an Executor without anyone waiting for them: a submitted run
// waits for one of MaxRuns slots in the order of its priority, runs in a goroutine of its
// own, and Finished tells when its outcome can be read. One run per run ID is known at a
// time; the ID's UID tells the runs of an owner from those of an earlier owner of the same
// name. It is a manager.Runnable: runs start once it is started, and stopping it stops
// them as cancelling Executor.Run does, recording no outcome.
type Scheduler struct {
	Executor Executor
	// Log is the logger of the runs, to which each run adds its object and trace (runLog);
	// when unset, the logger of Start's context.
	Log logr.Logger
	// MaxRuns bounds the runs under way; DefaultMaxRuns when zero.
	MaxRuns int
	// DriftShare is the share of MaxRuns that drift plans may hold at once, at least one
	// slot; DefaultDriftShare when zero.
	DriftShare float64
	// Finished, when set, is called with the ID of a run whose outcome can be read, or
	// that waits again because it could not start.
	Finished func(run.ID)
	// Waiting, when set, is kept at the number of waiting runs by priority (one label).
	Waiting *prometheus.GaugeVec
	// DriftAging is how long a drift plan waits before it ranks ahead of every reconcile
	// (never ahead of a deletion or creation); DefaultDriftAging when zero.
	DriftAging time.Duration

	// RunsPerAccount bounds the runs under way of one budget key (the runs of one provider
	// and set of credentials, Request.Budget); zero bounds them by MaxRuns alone.
	RunsPerAccount int
	// ThrottlePause is the first pause of an account whose run the cloud throttled; it
	// doubles with each throttle in a row up to MaxThrottlePause. Defaults when zero.
	ThrottlePause    time.Duration
	MaxThrottlePause time.Duration
	// Throttled, when set, is called when a throttled run made its account's budget back
	// off further: fewer slots, or a longer pause.
	Throttled func(id run.ID, backoff run.Backoff)
	// BudgetRuns, when set, is kept at the runs of each budget key by state ("running",
	// "waiting"); BudgetSlots at the slots a budget has now; Throttles counts the
	// throttled runs per budget key.
	BudgetRuns  *prometheus.GaugeVec
	BudgetSlots *prometheus.GaugeVec
	Throttles   *prometheus.CounterVec

	mu      sync.Mutex
	ctx     context.Context
	tickets map[run.ID]*scheduled
	seq     uint64
	running [priorities]int
	budgets map[string]*budget
	// projectRuns counts the runs under way per priority and project, for the turns.
	projectRuns map[projectKey]int
	// queue is the tickets in the order they were submitted, those forgotten or done
	// since among them until ordered drops them.
	queue []*scheduled
	// order and seen are ordered's, kept between calls.
	order []waitingRun
	seen  map[projectKey]int
	runs  sync.WaitGroup
}

type projectKey struct {
	priority run.Priority
	project  string
}

// budget is the state of one budget key: its runs, and how far it backed off.
type budget struct {
	running, waiting int
	// slots are the runs that may be under way now: the full budget, or fewer after a throttle.
	slots int
	// pause is the last pause; the next throttle in a row doubles it.
	pause       time.Duration
	pausedUntil time.Time
	timer       *time.Timer
}

type scheduled struct {
	run.Ticket
	req run.Request
	seq uint64
	// stop interrupts the run under way.
	stop context.CancelFunc
	// state is the finished run's state, compressed: a ticket waits for the reconcile that
	// reads it, and a seed's backlog of them must not hold every state whole.
	state []byte
	// notBefore is when a run that could not start may start again.
	notBefore time.Time
	// parent is the span of the reconcile that submitted the run: its wait for a slot
	// (slot) and the run itself are in that trace.
	parent trace.SpanContext
	slot   trace.Span
	// waited is why the run waited for its slot (waitFor bits).
	waited waitFor
	// forgotten is set once the ticket is dropped from the scheduler's tickets.
	forgotten bool
}

// waitFor is why a run waited for a slot.
type waitFor uint8

const (
	// waitPriority: every slot was held, or the runs ranking ahead took the free ones.
	waitPriority waitFor = 1 << iota
	// waitBudget: as many runs of its cloud account as may run at once were under way.
	waitBudget
	// waitThrottle: its account backed off after the cloud throttled it.
	waitThrottle
	// waitRetry: it could not start and waited to start again.
	waitRetry
)

// names are the reasons of w, for the slot span.
func (w waitFor) names() []string {
	var names []string
	for i, name := range []string{"priority", "budget", "throttle", "retry"} {
		if w&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return names
}

// Submit queues a run; a run already known for its ID is refused: Cancel it
// first. ctx gives the run its trace; its logger is not kept (runLog).
func (s *Scheduler) Submit(ctx context.Context, req run.Request, priority run.Priority) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if priority < 0 || int(priority) >= priorities {
		return run.InvalidInput("priority", fmt.Sprintf("%d is not a priority", priority))
	}
	if req.LoadEnv != nil {
		// Read again as the run starts (start).
		req.Env = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tickets == nil {
		s.tickets = map[run.ID]*scheduled{}
	}
	if t, ok := s.tickets[req.ID]; ok {
		return inProgress(req.Command, fmt.Sprintf("%s (%s is %s)", run.ErrRunInProgress, t.Command, t.Phase))
	}
	s.seq++
	_, slot := tracing.Start(ctx, "slot", attribute.String("terraseed.command", string(req.Command)), attribute.String("terraseed.priority", priority.String()))
	t := &scheduled{
		// Submitted: a drift plan's rank grows with its wait.
		Ticket: run.Ticket{Command: req.Command, Digest: req.Digest, Priority: priority, Phase: run.PhaseWaiting, Budget: req.Budget, Submitted: s.clock()},
		req:    req, seq: s.seq,
		parent: trace.SpanContextFromContext(ctx), slot: slot,
	}
	s.tickets[req.ID] = t
	s.queue = append(s.queue, t)
	s.dispatch()
	if t.Phase == run.PhaseWaiting {
		tracing.Set(slot, attribute.Int("terraseed.slot.ahead", t.Ahead))
	}
	return nil
}

// Lookup returns the ticket of the run of id, false when none is known.
func (s *Scheduler) Lookup(id run.ID) (run.Ticket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tickets[id]
	if !ok {
		return run.Ticket{}, false
	}
	return t.Ticket, true
}

// Take returns the ticket of the finished run of id, its outcome with the whole state,
// and forgets it; false when no run of id is done. Lookup's tickets hold no state.
func (s *Scheduler) Take(id run.ID) (run.Ticket, bool) {
	s.mu.Lock()
	t, ok := s.tickets[id]
	if !ok || t.Phase != run.PhaseDone {
		s.mu.Unlock()
		return run.Ticket{}, false
	}
	s.forget(id)
	s.dispatch()
	s.mu.Unlock()
	ticket := t.Ticket
	if ticket.Result == nil || t.state == nil {
		return ticket, true
	}
	result := *ticket.Result
	expanded, err := state.Gunzip(bytes.NewReader(t.state))
	if err != nil {
		ticket.Result, ticket.Err = nil, fmt.Errorf("expanding the state of the finished run: %w", err)
		return ticket, true
	}
	result.State = expanded
	ticket.Result = &result
	return ticket, true
}

// Cancel drops a waiting run, or the outcome of a finished one; a run under way is not
// stopped, and false says so: the caller must not touch what the run reads.
func (s *Scheduler) Cancel(id run.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tickets[id]
	if !ok {
		return true
	}
	if t.Phase == run.PhaseRunning {
		return false
	}
	s.forget(id)
	s.dispatch()
	return true
}

// ForgetName drops what is known of the runs of every owner of the name of id (any UID),
// but runs under way: for an object that is gone.
func (s *Scheduler) ForgetName(id run.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for known, t := range s.tickets {
		if known.Namespace == id.Namespace && known.Name == id.Name && known.Purpose == id.Purpose && t.Phase != run.PhaseRunning {
			s.forget(known)
		}
	}
	s.dispatch()
}

// Stop ends the run of id: a waiting run is dropped, a run under way is interrupted as a
// shutdown interrupts it (terraform stops, the state is saved) and its outcome, an
// error, is recorded when it ended; Finished tells when. It reports whether no run of id
// is under way any more.
func (s *Scheduler) Stop(ctx context.Context, id run.ID) (bool, error) {
	s.mu.Lock()
	t, ok := s.tickets[id]
	if !ok || t.Phase != run.PhaseRunning {
		// A waiting run holds nothing: one that could not start left no pod (notStartedError).
		if ok && t.Phase == run.PhaseWaiting {
			s.forget(id)
			s.dispatch()
		}
		s.mu.Unlock()
		return true, nil
	}
	first := !t.Stopping
	t.Stopping = true
	stop := t.stop
	s.mu.Unlock()
	if !first {
		return false, nil
	}
	logf.FromContext(ctx).Info("stoppingRun", "command", t.Command)
	stop()
	if stopper, ok := s.Executor.(stopper); ok {
		if err := stopper.Stop(ctx, id); err != nil {
			return false, fmt.Errorf("stopping the run: %w", err)
		}
	}
	return false, nil
}

// Start runs what was and will be submitted until ctx ends, then waits for the runs under
// way to stop.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.ctx != nil {
		s.mu.Unlock()
		return fmt.Errorf("the run scheduler is started already")
	}
	s.ctx = ctx
	s.dispatch()
	s.mu.Unlock()
	<-ctx.Done()
	s.runs.Wait()
	return nil
}

func (s *Scheduler) maxRuns() int { return cmp.Or(s.MaxRuns, DefaultMaxRuns) }

// driftSlots is how many drift plans may run at once: at least one.
func (s *Scheduler) driftSlots() int {
	share := cmp.Or(s.DriftShare, DefaultDriftShare)
	return max(1, int(math.Floor(share*float64(s.maxRuns()))))
}

func (s *Scheduler) driftAging() time.Duration { return cmp.Or(s.DriftAging, DefaultDriftAging) }

func (s *Scheduler) clock() time.Time { return time.Now() }

// rank orders the waiting runs: by priority, except that a drift plan that waited
// DriftAging ranks between creations and reconciles, so that a steady stream of
// reconciles never holds it back for longer than that and one run's end; and an urgent
// run (Request.Urgent), but a drift plan, ranks ahead of every run that is not urgent:
// its caller gives up before a seed's backlog of creations would have run. Among urgent
// runs, a reconcile ranks ahead of the creations: its object serves now (a DNSRecord a
// running shoot's domain resolves by) and waits for a change, where a creation delays
// an object that serves nothing yet, and a seed's backlog of creations (every shoot's
// records at once) would outlast its caller's wait.
func (s *Scheduler) rank(t *scheduled, now time.Time) int {
	r := 2 * int(t.Priority)
	if t.Priority == run.PriorityDrift && now.Sub(t.Submitted) >= s.driftAging() {
		r = 2*int(run.PriorityReconcile) - 1
	}
	if t.req.Urgent && t.Priority != run.PriorityDrift {
		if t.Priority == run.PriorityReconcile {
			r = 2*int(run.PriorityCreate) - 1
		}
		r -= 2 * priorities
	}
	return r
}

// ordered is the waiting runs in the order they get a slot: by rank; within one, the
// projects take turns (a run's turn is how many runs of its project and priority are
// under way or wait before it), so that one project's many runs do not hold every slot;
// then in the order they came. Every submit and every end orders a seed's whole backlog
// again, so it sorts once, from the queue kept in the order the runs came, and allocates
// nothing beside s.order and s.queue, which it reuses. s.mu is held.
func (s *Scheduler) ordered(now time.Time) []waitingRun {
	if s.seen == nil {
		s.seen = map[projectKey]int{}
	}
	clear(s.seen)
	waiting, queue := s.order[:0], s.queue[:0]
	for _, t := range s.queue {
		if t.forgotten || t.Phase == run.PhaseDone {
			continue
		}
		queue = append(queue, t)
		if t.Phase != run.PhaseWaiting {
			continue
		}
		key := projectKey{t.Priority, t.req.Project}
		waiting = append(waiting, waitingRun{scheduled: t, rank: s.rank(t, now), turn: s.projectRuns[key] + s.seen[key]})
		s.seen[key]++
	}
	clear(s.queue[len(queue):])
	s.queue = queue
	slices.SortFunc(waiting, func(a, b waitingRun) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.turn, b.turn), cmp.Compare(a.seq, b.seq))
	})
	s.order = waiting
	return waiting
}

// forget drops the ticket of id. s.mu is held.
func (s *Scheduler) forget(id run.ID) {
	if t, ok := s.tickets[id]; ok {
		t.forgotten = true
		delete(s.tickets, id)
	}
}

// waitingRun is a waiting run with its place in ordered.
type waitingRun struct {
	*scheduled
	rank, turn int
}

// budgetOf returns the state of a budget key, made with the full budget. s.mu is held.
func (s *Scheduler) budgetOf(key string) *budget {
	if s.budgets == nil {
		s.budgets = map[string]*budget{}
	}
	b, ok := s.budgets[key]
	if !ok {
		b = &budget{slots: s.fullBudget()}
		s.budgets[key] = b
	}
	return b
}

// fullBudget is the slots of an account that was not throttled.
func (s *Scheduler) fullBudget() int {
	if s.RunsPerAccount > 0 {
		return s.RunsPerAccount
	}
	return s.maxRuns()
}

// admits says whether a run of the budget may start now.
func (b *budget) admits(now time.Time) bool {
	return b.running < b.slots && !now.Before(b.pausedUntil)
}

// dispatch starts waiting runs while slots are free, in the order of ordered; a drift
// plan over its share, or a run over its account's budget, lets the runs behind it go
// first. s.mu is held.
func (s *Scheduler) dispatch() {
	now := s.clock()
	waiting := s.ordered(now)
	if s.ctx != nil && s.ctx.Err() == nil {
		busy := 0
		for _, n := range s.running {
			busy += n
		}
		for _, t := range waiting {
			if busy >= s.maxRuns() {
				break
			}
			if t.Priority == run.PriorityDrift && s.running[run.PriorityDrift] >= s.driftSlots() || t.notBefore.After(now) {
				continue
			}
			if t.req.Budget != "" && !s.budgetOf(t.req.Budget).admits(now) {
				continue
			}
			s.start(t.scheduled)
			busy++
		}
	}
	ahead := 0
	for _, t := range waiting {
		if t.Phase != run.PhaseWaiting {
			continue
		}
		t.Ahead = ahead
		ahead++
		t.OverBudget = t.req.Budget != "" && !s.budgetOf(t.req.Budget).admits(now)
		t.waited |= s.waitReason(t.scheduled, now)
	}
	// What ordered keeps between calls holds no run that ended since.
	clear(waiting)
	s.measure()
}

// measure keeps the gauges. s.mu is held.
func (s *Scheduler) measure() {
	if s.Waiting != nil {
		var counts [priorities]int
		for _, t := range s.tickets {
			if t.Phase == run.PhaseWaiting {
				counts[t.Priority]++
			}
		}
		for p, n := range counts {
			s.Waiting.WithLabelValues(run.Priority(p).String()).Set(float64(n))
		}
	}
	for _, b := range s.budgets {
		b.waiting = 0
	}
	for _, t := range s.tickets {
		if t.Phase == run.PhaseWaiting && t.req.Budget != "" {
			s.budgetOf(t.req.Budget).waiting++
		}
	}
	for key, b := range s.budgets {
		if s.BudgetRuns != nil {
			s.BudgetRuns.WithLabelValues(key, "running").Set(float64(b.running))
			s.BudgetRuns.WithLabelValues(key, "waiting").Set(float64(b.waiting))
		}
		if s.BudgetSlots != nil {
			s.BudgetSlots.WithLabelValues(key).Set(float64(b.slots))
		}
	}
}

// ended records the end of a run in its account's budget: a throttled run halves the
// budget's slots (at least one) and pauses it, twice as long as the last time when the
// budget had not recovered since; a run that succeeded gives back one slot, and once all
// are back the next pause starts from ThrottlePause again. s.mu is held.
func (s *Scheduler) ended(t *scheduled, err error) (run.Backoff, bool) {
	key := t.req.Budget
	if key == "" {
		return run.Backoff{}, false
	}
	b := s.budgetOf(key)
	b.running--
	now := s.clock()
	switch {
	case err != nil && t.req.Throttled != nil && t.req.Throttled(err):
		slots, pause := b.slots, b.pause
		b.slots = max(1, b.slots/2)
		b.pause = min(cmp.Or(s.MaxThrottlePause, defaultMaxThrottlePause), max(cmp.Or(s.ThrottlePause, defaultThrottlePause), 2*b.pause))
		if until := now.Add(b.pause); until.After(b.pausedUntil) {
			b.pausedUntil = until
			if b.timer != nil {
				b.timer.Stop()
			}
			b.timer = time.AfterFunc(b.pause, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.dispatch()
			})
		}
		if s.Throttles != nil {
			s.Throttles.WithLabelValues(key).Inc()
		}
		// Told only when the backoff deepened: at one slot and the longest pause, more
		// throttles change nothing to tell.
		return run.Backoff{Budget: key, Slots: b.slots, Pause: b.pause}, b.slots != slots || b.pause != pause
	case err == nil && b.slots < s.fullBudget():
		b.slots++
	case err == nil:
		b.pause = 0
	}
	return run.Backoff{}, false
}

// waitReason is why t waits now. s.mu is held.
func (s *Scheduler) waitReason(t *scheduled, now time.Time) waitFor {
	if t.notBefore.After(now) {
		return waitRetry
	}
	if t.req.Budget != "" {
		if b := s.budgetOf(t.req.Budget); !b.admits(now) {
			if now.Before(b.pausedUntil) || b.slots < s.fullBudget() {
				return waitThrottle
			}
			return waitBudget
		}
	}
	return waitPriority
}

// start runs t in a goroutine of its own. s.mu is held.
func (s *Scheduler) start(t *scheduled) {
	if t.slot.IsRecording() {
		t.slot.SetAttributes(attribute.StringSlice("terraseed.slot.waited_for", t.waited.names()))
	}
	t.slot.End()
	t.Phase = run.PhaseRunning
	s.running[t.Priority]++
	if s.projectRuns == nil {
		s.projectRuns = map[projectKey]int{}
	}
	s.projectRuns[projectKey{t.Priority, t.req.Project}]++
	if t.req.Budget != "" {
		s.budgetOf(t.req.Budget).running++
	}
	s.runs.Add(1)
	log := s.Log
	if log.GetSink() == nil {
		log = logf.FromContext(s.ctx)
	}
	ctx, stop := context.WithCancel(logf.IntoContext(s.ctx, runLog(log, t)))
	ctx, span := tracing.Start(tracing.WithParent(ctx, t.parent), "run",
		attribute.String("terraseed.command", string(t.req.Command)), attribute.String("terraseed.priority", t.Priority.String()))
	t.stop = stop
	t.Trace = span.SpanContext()
	go func() {
		defer s.runs.Done()
		defer stop()
		req, err := withLoadedEnv(ctx, t.req)
		var result *run.Result
		if err == nil {
			result, err = s.Executor.Run(ctx, req)
		}
		tracing.Fail(span, err)
		span.End()
		var compressed []byte
		if err == nil && result != nil && len(result.State) > 0 {
			if compressed, err = gzipped(result.State); err == nil {
				kept := *result
				kept.State = nil
				result = &kept
			}
		}
		s.mu.Lock()
		s.running[t.Priority]--
		if key := (projectKey{t.Priority, t.req.Project}); s.projectRuns[key] > 1 {
			s.projectRuns[key]--
		} else {
			delete(s.projectRuns, key)
		}
		backoff, throttled := s.ended(t, err)
		// Stopped with the scheduler, the run left what it had for the next leader: no
		// outcome is recorded. Stopped alone (Stop), it ended for good.
		shutdown := s.ctx.Err() != nil
		waiting, notStarted := notStarted(err)
		switch {
		case shutdown:
			s.forget(t.req.ID)
		case notStarted && !t.Stopping:
			// It waits again, in its place, without a slot.
			t.Phase, t.NotStarted, t.notBefore = run.PhaseWaiting, waiting.Reason, s.clock().Add(NotStartedRetry)
			time.AfterFunc(NotStartedRetry, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.dispatch()
			})
		default:
			t.Phase, t.Result, t.Err, t.state = run.PhaseDone, result, err, compressed
		}
		s.dispatch()
		s.mu.Unlock()
		if throttled && s.Throttled != nil {
			s.Throttled(t.req.ID, backoff)
		}
		if !shutdown && s.Finished != nil {
			s.Finished(t.req.ID)
		}
	}()
}

// ErrCredentialsNotRead fails a run whose credentials could not be read as it started
// (run.Request.LoadEnv).
var ErrCredentialsNotRead = errors.New("the run's credentials could not be read as it started")

// withLoadedEnv returns req with Env read by LoadEnv, when it has one, and checked as
// Validate checks a request.
func withLoadedEnv(ctx context.Context, req run.Request) (run.Request, error) {
	if req.LoadEnv == nil {
		return req, nil
	}
	env, err := req.LoadEnv(ctx)
	if err != nil {
		return req, fmt.Errorf("%w: %w", ErrCredentialsNotRead, err)
	}
	req.Env, req.LoadEnv = env, nil
	return req, req.Validate()
}

// runLog is the logger of a run that starts: the scheduler's, with the run's object and
// the trace of the reconcile that submitted it. A waiting run keeps no logger of that
// reconcile: with its values, it takes a kilobyte or more, a seed's backlog of thousands
// of waiting runs megabytes.
func runLog(log logr.Logger, t *scheduled) logr.Logger {
	log = log.WithValues("kind", t.req.ID.Purpose.Kind(), "namespace", t.req.ID.Namespace, "name", t.req.ID.Name)
	if t.parent.HasTraceID() {
		log = log.WithValues("traceID", t.parent.TraceID().String())
	}
	return log
}

// gzipped is state compressed at the speed gzip favours: it is expanded again a moment later.
func gzipped(compressible []byte) ([]byte, error) {
	return state.Gzip(compressible, gzip.BestSpeed)
}
