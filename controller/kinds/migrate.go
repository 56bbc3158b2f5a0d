package kinds

import (
	"context"
	"errors"
	"fmt"

	"github.com/terraseed/terraseed/controller/extension"
)

// migrate keeps the state in .status.state and releases the run objects without
// destroying anything: another seed takes the resources over.
func (op *operation) migrate(ctx context.Context) error {
	// The snapshot must be the final state: no run may write it afterwards.
	if err := op.settle(ctx); err != nil {
		return err
	}
	state, err := op.objects().ReadState(ctx, op.actuator.Client)
	if err != nil {
		return fmt.Errorf("reading the state: %w", err)
	}
	if state != nil {
		encoded, err := encodeState(state, op.indexOf(state))
		var tooLarge *stateTooLargeError
		if errors.As(err, &tooLarge) {
			recordStateSize(op.kind, op.obj, tooLarge.size)
			return extension.InvalidInput(reasonStateTooLarge, "status.state: %w; it stays in %s %s/%s", err, op.objects().Storage.Kind(), op.objects().ID.Namespace, op.objects().StateName())
		}
		if err != nil {
			return err
		}
		op.status().State = encoded
		recordStateSize(op.kind, op.obj, len(encoded.Raw))
		// The state must be safe in the status before the objects that hold it go.
		if err := op.req.PatchStatus(ctx); err != nil {
			return err
		}
	}
	return op.deleteRunObjects(ctx)
}

// restore writes the state kept in .status.state back into the state object, then applies:
// terraform finds every resource in the restored state and recreates none. A restore
// retried after a failed apply keeps the newer state that apply wrote.
func (op *operation) restore(ctx context.Context) error {
	return op.apply(ctx, &applyScope{restore: true})
}
