package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// errDraining refuses a run asked for once the process stops hosting runs.
var errDraining = errors.New("the controller is stopping: no run starts any more")

// lifecycle is what a local executor's runs need of the leader election: a replica that
// took the lease over from one that did not release it starts no run before the other's
// runs could have stopped and saved (its working directories are out of sight, on
// another machine), and a replica that stops, for a lost lease too, waits for its own.
type lifecycle struct {
	mu        sync.Mutex
	notBefore time.Time
	draining  bool
	runs      sync.WaitGroup
}

// enter admits a run once the hold is over; leave must follow unless it fails.
func (l *lifecycle) enter(ctx context.Context) error {
	l.mu.Lock()
	if l.draining {
		l.mu.Unlock()
		return errDraining
	}
	l.runs.Add(1)
	notBefore := l.notBefore
	l.mu.Unlock()
	wait := time.Until(notBefore)
	if wait <= 0 {
		return nil
	}
	logf.FromContext(ctx).Info("runWaitsForTheFormerLeader", "until", notBefore.UTC().Format(time.RFC3339), "wait", wait.Round(time.Second).String())
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		l.runs.Done()
		return ctx.Err()
	}
}

func (l *lifecycle) leave() { l.runs.Done() }

// holding is true until the hold after a takeover is over.
func (l *lifecycle) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.notBefore)
}

// HoldRunsUntil lets no run start before t; a later hold extends an earlier one.
func (e *LocalExecutor) HoldRunsUntil(t time.Time) {
	e.lifecycle.mu.Lock()
	defer e.lifecycle.mu.Unlock()
	if t.After(e.lifecycle.notBefore) {
		e.lifecycle.notBefore = t
	}
}

// Drain starts no run any more and waits, at most until ctx ends, for the runs under way
// to end: interrupted by the manager's stop, each stops terraform and saves its state.
// controller-runtime waits for nothing when the lease is lost (it skips the graceful
// shutdown), so the process must wait here before it exits, or its terraform dies with
// it before the final save.
func (e *LocalExecutor) Drain(ctx context.Context) error {
	e.lifecycle.mu.Lock()
	e.lifecycle.draining = true
	e.lifecycle.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		e.lifecycle.runs.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the local runs to stop and save their state: %w", context.Cause(ctx))
	}
}

// StartAndDrain starts mgr, and returns once it stopped and, however it stopped, the
// runs of e under way have stopped and saved their state, for at most bound.
// controller-runtime skips the graceful shutdown when the lease is lost, and the process
// exits right after the manager's Start: without this wait its terraform would die with
// it before the final save. e may be nil (runs not local).
func StartAndDrain(ctx context.Context, mgr manager.Manager, e *LocalExecutor, bound time.Duration) error {
	err := mgr.Start(ctx)
	if e == nil {
		return err
	}
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	started := time.Now()
	if drainErr := e.Drain(drainCtx); drainErr != nil {
		return errors.Join(err, drainErr)
	}
	logf.FromContext(ctx).Info("localRunsEnded", "waited", time.Since(started).Round(time.Millisecond).String(), "managerError", fmt.Sprint(err))
	return err
}

// HoldAfterTakeover wraps the leader election lock of a replica that runs terraform
// itself: when it takes the lease over from a holder that did not release it (lost,
// crashed, cut off), hold is told until when its runs must wait: until the old lease had
// been expired for bound, the time the old holder's runs may take to stop and save (the
// stop timeout and the final save's), so that no run starts from a state an old run still
// writes. A lease released (the graceful shutdown waited for the runs) or never held
// costs no wait.
func HoldAfterTakeover(lock resourcelock.Interface, bound time.Duration, hold func(until time.Time)) resourcelock.Interface {
	return &takeoverLock{Interface: lock, hold: hold, bound: bound}
}

// takeoverLock remembers the record it read last, which an acquiring update replaces:
// the old holder, its last renewal and its lease's duration are gone after it.
type takeoverLock struct {
	resourcelock.Interface
	hold  func(until time.Time)
	bound time.Duration

	mu   sync.Mutex
	read *resourcelock.LeaderElectionRecord
}

func (l *takeoverLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.read = nil
	if err == nil && record != nil {
		read := *record
		l.read = &read
	}
	return record, raw, err
}

func (l *takeoverLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if err := l.Interface.Update(ctx, record); err != nil {
		return err
	}
	l.mu.Lock()
	old := l.read
	l.read = nil
	l.mu.Unlock()
	if old == nil || old.HolderIdentity == "" || old.HolderIdentity == l.Identity() || record.HolderIdentity != l.Identity() {
		return nil
	}
	now := time.Now()
	until := old.RenewTime.Add(time.Duration(old.LeaseDurationSeconds) * time.Second).Add(l.bound)
	// The old holder's clock wrote renewTime: one ahead of ours must not hold the runs
	// longer than a lease that expired just now would.
	if latest := now.Add(l.bound); until.After(latest) {
		until = latest
	}
	if until.After(now) {
		l.hold(until)
	}
	logf.FromContext(ctx).Info("leaseTakenOver", "formerHolder", old.HolderIdentity, "formerRenewTime", old.RenewTime.UTC().Format(time.RFC3339), "runsHeldUntil", until.UTC().Format(time.RFC3339))
	return nil
}
