package executor

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// Priority orders the runs waiting for a slot: a lower one starts first.
type Priority int

const (
	// PriorityDelete is a deletion's destroy: it frees what the seed holds.
	PriorityDelete Priority = iota
	// PriorityCreate is the first apply of a new object, or one of a restoration.
	PriorityCreate
	// PriorityReconcile is an apply Gardener or a change of the object asked for.
	PriorityReconcile
	// PriorityDrift is a plan that checks an up-to-date object for drift.
	PriorityDrift
)

var priorityNames = [...]string{"delete", "create", "reconcile", "drift"}

func (p Priority) String() string {
	if p < 0 || int(p) >= len(priorityNames) {
		return fmt.Sprintf("priority(%d)", int(p))
	}
	return priorityNames[p]
}

// DefaultMaxRuns bounds the runs under way when Scheduler.MaxRuns is zero.
const DefaultMaxRuns = 5

// NotStartedRetry is how long a run that could not start (NotStartedError) waits before
// it starts again, holding no run slot meanwhile.
var NotStartedRetry = 10 * time.Second

// DefaultDriftShare is the share of the run slots drift plans may take at once when
// Scheduler.DriftShare is zero.
const DefaultDriftShare = 0.2

// Phase is where a scheduled run is.
type Phase string

const (
	PhaseWaiting Phase = "Waiting"
	PhaseRunning Phase = "Running"
	// PhaseDone runs keep their outcome until it is taken with Forget.
	PhaseDone Phase = "Done"
)

// Ticket is what the scheduler knows of the run of one run ID.
type Ticket struct {
	Command  run.Command
	Digest   string
	Priority Priority
	Phase    Phase
	// Ahead is how many waiting runs start before this one, while it waits.
	Ahead int
	// Result and Err are the run's outcome once it is done.
	Result *run.Result
	Err    error
	// Stopping is set once Stop asked the run under way to stop.
	Stopping bool
	// NotStarted says why a waiting run that started could not (NotStartedError): it
	// starts again after NotStartedRetry.
	NotStarted string
}

// Of is true when the ticket is of the request: the same command on the same configuration.
func (t Ticket) Of(req Request) bool {
	return t.Command == req.Command && t.Digest == req.Digest
}

// Scheduler runs requests on an Executor without anyone waiting for them: a submitted run
// waits for one of MaxRuns slots in the order of its priority, runs in a goroutine of its
// own, and Finished tells when its outcome can be read. One run per run ID is known at a
// time; the ID's UID tells the runs of an owner from those of an earlier owner of the same
// name. It is a manager.Runnable: runs start once it is started, and stopping it stops
// them as cancelling Executor.Run does, recording no outcome.
type Scheduler struct {
	Executor Executor
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

	mu      sync.Mutex
	ctx     context.Context
	tickets map[run.ID]*scheduled
	seq     uint64
	running [len(priorityNames)]int
	runs    sync.WaitGroup
}

type scheduled struct {
	Ticket
	req Request
	log logr.Logger
	seq uint64
	// stop interrupts the run under way.
	stop context.CancelFunc
	// state is the finished run's state, compressed: a ticket waits for the reconcile that
	// reads it, and a seed's backlog of them must not hold every state whole.
	state []byte
	// notBefore is when a run that could not start may start again.
	notBefore time.Time
}

// Submit queues a run; a run already known for its ID is refused: Cancel or Forget it
// first. The request's context values (the logger) are taken from ctx.
func (s *Scheduler) Submit(ctx context.Context, req Request, priority Priority) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if priority < 0 || int(priority) >= len(priorityNames) {
		return run.InvalidInput("priority", fmt.Sprintf("%d is not a priority", priority))
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
	s.tickets[req.ID] = &scheduled{
		Ticket: Ticket{Command: req.Command, Digest: req.Digest, Priority: priority, Phase: PhaseWaiting},
		req:    req, log: logf.FromContext(ctx), seq: s.seq,
	}
	s.dispatch()
	return nil
}

// Lookup returns the ticket of the run of id, false when none is known.
func (s *Scheduler) Lookup(id run.ID) (Ticket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tickets[id]
	if !ok {
		return Ticket{}, false
	}
	ticket := t.Ticket
	if ticket.Phase == PhaseWaiting {
		for _, other := range s.tickets {
			if other.Phase == PhaseWaiting && before(other, t) {
				ticket.Ahead++
			}
		}
	}
	return ticket, true
}

// Take returns the ticket of the finished run of id, its outcome with the whole state,
// and forgets it; false when no run of id is done. Lookup's tickets hold no state.
func (s *Scheduler) Take(id run.ID) (Ticket, bool) {
	s.mu.Lock()
	t, ok := s.tickets[id]
	if !ok || t.Phase != PhaseDone {
		s.mu.Unlock()
		return Ticket{}, false
	}
	delete(s.tickets, id)
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
	if t.Phase == PhaseRunning {
		return false
	}
	delete(s.tickets, id)
	s.dispatch()
	return true
}

// Forget drops the outcome of a finished run, or a waiting run; a run under way stays,
// and false says so.
func (s *Scheduler) Forget(id run.ID) bool { return s.Cancel(id) }

// ForgetName drops what is known of the runs of every owner of the name of id (any UID),
// but runs under way: for an object that is gone.
func (s *Scheduler) ForgetName(id run.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for known, t := range s.tickets {
		if known.Namespace == id.Namespace && known.Name == id.Name && known.Purpose == id.Purpose && t.Phase != PhaseRunning {
			delete(s.tickets, known)
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
	if !ok || t.Phase != PhaseRunning {
		// A run that could not start may have left a pod waiting for a node.
		leftPod := ok && t.Phase == PhaseWaiting && t.NotStarted != ""
		if ok && t.Phase == PhaseWaiting {
			delete(s.tickets, id)
			s.dispatch()
		}
		s.mu.Unlock()
		if stopper, isStopper := s.Executor.(Stopper); leftPod && isStopper {
			if err := stopper.Stop(ctx, id); err != nil {
				return false, fmt.Errorf("stopping the run: %w", err)
			}
		}
		return true, nil
	}
	first := !t.Stopping
	t.Stopping = true
	stop := t.stop
	s.mu.Unlock()
	if !first {
		return false, nil
	}
	t.log.Info("stoppingRun", "command", t.Command)
	stop()
	if stopper, ok := s.Executor.(Stopper); ok {
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

func before(a, b *scheduled) bool {
	return a.Priority < b.Priority || (a.Priority == b.Priority && a.seq < b.seq)
}

// dispatch starts waiting runs while slots are free, in the order of priority and
// submission; a drift plan over its budget lets the runs behind it go first. s.mu is held.
func (s *Scheduler) dispatch() {
	var waiting []*scheduled
	for _, t := range s.tickets {
		if t.Phase == PhaseWaiting {
			waiting = append(waiting, t)
		}
	}
	slices.SortFunc(waiting, func(a, b *scheduled) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	if s.ctx != nil && s.ctx.Err() == nil {
		busy := 0
		for _, n := range s.running {
			busy += n
		}
		now := time.Now()
		for _, t := range waiting {
			if busy >= s.maxRuns() {
				break
			}
			if t.Priority == PriorityDrift && s.running[PriorityDrift] >= s.driftSlots() || t.notBefore.After(now) {
				continue
			}
			s.start(t)
			busy++
		}
	}
	if s.Waiting != nil {
		var counts [len(priorityNames)]int
		for _, t := range s.tickets {
			if t.Phase == PhaseWaiting {
				counts[t.Priority]++
			}
		}
		for p, n := range counts {
			s.Waiting.WithLabelValues(Priority(p).String()).Set(float64(n))
		}
	}
}

// start runs t in a goroutine of its own. s.mu is held.
func (s *Scheduler) start(t *scheduled) {
	t.Phase = PhaseRunning
	s.running[t.Priority]++
	s.runs.Add(1)
	ctx, stop := context.WithCancel(logf.IntoContext(s.ctx, t.log))
	t.stop = stop
	go func() {
		defer s.runs.Done()
		defer stop()
		result, err := s.Executor.Run(ctx, t.req)
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
		// Stopped with the scheduler, the run left what it had for the next leader: no
		// outcome is recorded. Stopped alone (Stop), it ended for good.
		shutdown := s.ctx.Err() != nil
		waiting, notStarted := notStarted(err)
		switch {
		case shutdown:
			delete(s.tickets, t.req.ID)
		case notStarted && !t.Stopping:
			// It waits again, in its place, without a slot.
			t.Phase, t.NotStarted, t.notBefore = PhaseWaiting, waiting.Reason, time.Now().Add(NotStartedRetry)
			time.AfterFunc(NotStartedRetry, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.dispatch()
			})
		default:
			t.Phase, t.Result, t.Err, t.state = PhaseDone, result, err, compressed
		}
		s.dispatch()
		s.mu.Unlock()
		if !shutdown && s.Finished != nil {
			s.Finished(t.req.ID)
		}
	}()
}

// gzipped is state compressed at the speed gzip favours: it is expanded again a moment later.
func gzipped(state []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(state); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
