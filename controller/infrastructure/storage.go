package infrastructure

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
)

// moveState moves the state into the kind of object this controller keeps states in
// (State.Storage) when the other kind holds it: a change of --state-storage takes effect
// without a run. It returns a runPendingError while a run that may write the state is
// under way, and moves nothing then.
func (op *operation) moveState(ctx context.Context) error {
	store := op.objects().Store(op.actuator.Client)
	pending, err := store.PendingMove(ctx)
	if err != nil || !pending {
		return err
	}
	id := op.objects().ID
	if ticket, known := op.actuator.Runs.Lookup(id); known {
		return &runPendingError{ticket: ticket, other: true}
	}
	if err := op.waitForEarlierRun(ctx, false); err != nil {
		return err
	}
	if _, err := store.Move(ctx); err != nil {
		return fmt.Errorf("moving the state into a %s: %w", op.objects().Storage.Kind(), err)
	}
	ctrl.LoggerFrom(ctx).Info("stateMoved", "from", op.objects().Storage.Other().Kind(), "to", op.objects().Storage.Kind())
	return nil
}

// moveStateBetweenRuns is moveState for an Infrastructure that is up to date: a run under
// way moves nothing, and its end reconciles the Infrastructure again.
func (op *operation) moveStateBetweenRuns(ctx context.Context) error {
	var pending *runPendingError
	if err := op.moveState(ctx); err != nil && !errors.As(err, &pending) {
		return err
	}
	return nil
}
