package executor

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

// DefaultProgressPollInterval is how often a run's report is read for its progress.
const DefaultProgressPollInterval = 2 * time.Second

// clearRunAnnotations removes what an earlier run reported, before a new run starts.
func clearRunAnnotations(ctx context.Context, c client.Client, id run.ID) error {
	config := client.ObjectKey{Namespace: id.Namespace, Name: id.ConfigName()}
	cleared := map[string]*string{run.AnnotationProgress: nil, run.AnnotationPlan: nil}
	if err := run.AnnotateConfig(ctx, c, config, cleared); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("clearing the progress of an earlier run: %w", err)
	}
	return nil
}

// runReport reads the progress and the plan a run reported so far.
type runReport func(ctx context.Context) (*run.Progress, *run.PlanSummary, error)

// annotationsReport reads what a run pod reports on its configuration ConfigMap.
func annotationsReport(c client.Client, id run.ID) runReport {
	return func(ctx context.Context) (*run.Progress, *run.PlanSummary, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.ConfigName()}, cm); err != nil {
			return nil, nil, client.IgnoreNotFound(err)
		}
		progress, plan := run.ReadRunAnnotations(cm.Annotations)
		return progress, plan, nil
	}
}

// fileReport reads what a terraformer on this machine reports in its report file.
func fileReport(path string) runReport {
	return func(context.Context) (*run.Progress, *run.PlanSummary, error) {
		annotations, err := run.ReadReportFile(path)
		if err != nil {
			return nil, nil, err
		}
		progress, plan := run.ReadRunAnnotations(annotations)
		return progress, plan, nil
	}
}

// followProgress hands every new progress of the run to report until the returned stop
// is called; stop returns once report is no longer called.
func followProgress(ctx context.Context, read runReport, req Request, interval time.Duration) (stop func()) {
	if req.Progress == nil {
		return func() {}
	}
	if interval <= 0 {
		interval = DefaultProgressPollInterval
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
			progress, _, err := read(ctx)
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
func withPlan(ctx context.Context, read runReport, req Request, result *run.Result) (*run.Result, error) {
	if req.Command != run.Apply && req.Command != run.Plan {
		return result, nil
	}
	_, plan, err := read(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the plan of the run: %w", err)
	}
	result.Plan = plan
	result.Changes = plan.HasChanges()
	return result, nil
}
