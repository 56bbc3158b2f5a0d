package run

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
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

// Phase is where a scheduled run is.
type Phase string

const (
	PhaseWaiting Phase = "Waiting"
	PhaseRunning Phase = "Running"
	// PhaseDone runs keep their outcome until it is taken with Take or dropped with Cancel.
	PhaseDone Phase = "Done"
)

// Ticket is what the scheduler knows of the run of one run ID.
type Ticket struct {
	Command  Command
	Digest   string
	Priority Priority
	Phase    Phase
	// Ahead is how many waiting runs start before this one, while it waits.
	Ahead int
	// Submitted is when the run was submitted.
	Submitted time.Time
	// Result and Err are the run's outcome once it is done.
	Result *Result
	Err    error
	// Stopping is set once Stop asked the run under way to stop.
	Stopping bool
	// Budget is the request's budget key.
	Budget string
	// Trace is the span of the run once it started: the reconcile that takes its outcome
	// links its own trace to it. Invalid while tracing is off.
	Trace trace.SpanContext
	// OverBudget is set while the run waits because its account's budget is used up or
	// paused, not for a slot of the seed.
	OverBudget bool
	// NotStarted says why a waiting run that started could not (NotStartedError): it
	// starts again after NotStartedRetry.
	NotStarted string
}

// Of is true when the ticket is of the request: the same command on the same configuration.
func (t Ticket) Of(req Request) bool {
	return t.Command == req.Command && t.Digest == req.Digest
}

// Backoff is what a throttle did to its account's budget.
type Backoff struct {
	Budget string
	// Slots is how many runs of the account may now be under way at once.
	Slots int
	// Pause is how long none of them starts.
	Pause time.Duration
}

// Hooks tell the owner of a Pipeline about its runs; either may be nil.
type Hooks struct {
	// Throttled is called when a throttled run made its account's budget back off further.
	Throttled func(id ID, backoff Backoff)
	// Ended is called with each run that ended on its own, not stopped (with the
	// controller, or dropped by the scheduler), and its error.
	Ended func(req Request, err error)
}
