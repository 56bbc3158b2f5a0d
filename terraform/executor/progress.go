package executor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
)

// defaultProgressPollInterval is how often a run's report is read for its progress.
const defaultProgressPollInterval = 2 * time.Second

// followProgress hands every new progress of the run, started at started, to report until
// the returned stop is called or the run's timeout (zero: none) is reached; stop returns
// once report is no longer called, with the last progress handed on (nil when there was
// none). Nothing is read past the timeout: a stopped run's report counts the change it was
// stopped in as done, and the progress at the deadline is what the run was doing then.
func followProgress(ctx context.Context, report report.Transport, req run.Request, started time.Time, interval, timeout time.Duration) (stop func() *run.Progress) {
	if req.Progress == nil {
		return func() *run.Progress { return nil }
	}
	if interval <= 0 {
		interval = defaultProgressPollInterval
	}
	if started.IsZero() {
		started = time.Now()
	}
	deadline := time.Time{}
	if timeout > 0 {
		deadline = started.Add(timeout)
	}
	ctx, cancel := contextUntil(ctx, deadline)
	done := make(chan struct{})
	var last *run.Progress
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			// A failed read is tried again at the next tick: progress is a courtesy.
			reported, err := report.Read(ctx)
			progress := reported.Progress
			if err != nil || progress == nil || (last != nil && reflect.DeepEqual(*progress, *last)) || progress.Command != string(req.Command) {
				continue
			}
			last = progress
			handed := *progress
			handed.Elapsed = time.Since(started)
			req.Progress(handed)
		}
	}()
	return func() *run.Progress {
		cancel()
		<-done
		return last
	}
}

// addProgressAtDeadline adds to the error of a run stopped at its timeout what the run was
// doing then, as it last reported it before the deadline: Gardener's wait, when it gives
// up, shows only the Infrastructure's lastError, and a run timeout alone says nothing of
// how far the apply got.
func addProgressAtDeadline(err error, last *run.Progress) {
	var runErr *run.Error
	if last == nil || !errors.Is(err, ErrRunDeadline) || !errors.As(err, &runErr) {
		return
	}
	runErr.Message += "; when stopped it was " + last.Description()
}

// withPlan adds the plan the run reported to its result.
func withPlan(ctx context.Context, report report.Transport, req run.Request, result *run.Result) (*run.Result, error) {
	if req.Command != run.Apply && req.Command != run.Plan {
		return result, nil
	}
	reported, err := report.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the plan of the run: %w", err)
	}
	result.Plan = reported.Plan
	result.Changes = reported.Plan.HasChanges()
	return result, nil
}

// addInterrupted names on a failed run's error the creates the run last reported under
// way: terraform ended before it recorded them, so the provider may have made them while
// no state holds them.
func addInterrupted(ctx context.Context, transport report.Transport, err error) {
	var runErr *run.Error
	if !errors.As(err, &runErr) {
		return
	}
	reported, readErr := transport.Read(ctx)
	if readErr != nil || reported.Progress == nil {
		return
	}
	runErr.Interrupted = reported.Progress.Creating
}

// contextUntil is ctx, ended at deadline unless that is zero.
func contextUntil(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, deadline)
}
