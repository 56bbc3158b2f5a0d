package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
)

// defaultProgressPollInterval is how often a run's report is read for its progress.
const defaultProgressPollInterval = 2 * time.Second

// followProgress hands every new progress of the run to report until the returned stop
// is called; stop returns once report is no longer called.
func followProgress(ctx context.Context, report report.Transport, req run.Request, interval time.Duration) (stop func()) {
	if req.Progress == nil {
		return func() {}
	}
	if interval <= 0 {
		interval = defaultProgressPollInterval
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		var last run.Progress
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			// A failed read is tried again at the next tick: progress is a courtesy.
			reported, err := report.Read(ctx)
			progress := reported.Progress
			if err != nil || progress == nil || *progress == last || progress.Command != string(req.Command) {
				continue
			}
			last = *progress
			req.Progress(*progress)
		}
	}()
	return func() {
		cancel()
		<-done
	}
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
