package infrastructure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// ErrRunUnderWay refuses a rollback while a run may write the state.
var ErrRunUnderWay = errors.New("an operation of the Infrastructure is under way")

// ErrNotInHistory is a rollback to a serial the history does not hold.
var ErrNotInHistory = errors.New("the state history holds no such serial")

// StateHistory lists the states kept of the Infrastructure key, newest first.
func StateHistory(ctx context.Context, c client.Client, key client.ObjectKey) ([]tfstate.HistoryEntry, error) {
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := c.Get(ctx, key, infra); err != nil {
		return nil, fmt.Errorf("reading Infrastructure %s: %w", key, err)
	}
	objects, err := tfstate.RunObjects{ID: runIDOf(infra)}.Found(ctx, c)
	if err != nil {
		return nil, err
	}
	history, err := objects.ReadHistory(ctx, c)
	if err != nil {
		return nil, err
	}
	return history.Entries, nil
}

// RollbackState makes the state of serial in the history of the Infrastructure key the
// live one, as a new serial of the same lineage, so that every writer of the state takes
// it for the newest. It refuses while an operation is under way or a run pod exists, and
// a state of another lineage than the live one. It returns the new serial.
func RollbackState(ctx context.Context, c client.Client, key client.ObjectKey, serial int64) (int64, error) {
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := c.Get(ctx, key, infra); err != nil {
		return 0, fmt.Errorf("reading Infrastructure %s: %w", key, err)
	}
	if last := infra.Status.LastOperation; last != nil && last.State == extensionsv1alpha1.LastOperationStateProcessing {
		return 0, fmt.Errorf("%w: %s is %s; roll back once it ended", ErrRunUnderWay, last.Type, last.State)
	}
	id := runIDOf(infra)
	if err := c.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.PodName()}, &corev1.Pod{}); err == nil {
		return 0, fmt.Errorf("%w: run pod %s exists", ErrRunUnderWay, id.PodName())
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("looking for a run pod: %w", err)
	}
	// The state is written back in the kind of object that holds it.
	objects, err := tfstate.RunObjects{ID: id}.Found(ctx, c)
	if err != nil {
		return 0, err
	}
	history, err := objects.ReadHistory(ctx, c)
	if err != nil {
		return 0, err
	}
	entry, ok := history.Find(serial)
	if !ok {
		return 0, fmt.Errorf("%w: serial %d; it holds %s", ErrNotInHistory, serial, serials(history.Entries))
	}
	target, err := history.State(entry)
	if err != nil {
		return 0, err
	}
	store := objects.Store(c)
	// A live state that cannot be read now is not lost: a rollback over it would forget
	// what it holds.
	live, err := store.Inspect(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the live state: %w; nothing is written", err)
	}
	if live.Lineage != "" && live.Lineage != entry.Lineage {
		return 0, fmt.Errorf("%w: the live state is of lineage %s, serial %d of the history of lineage %s", tfstate.ErrLineageMismatch, live.Lineage, serial, entry.Lineage)
	}
	next := live.Serial
	for _, e := range history.Lineage(entry.Lineage) {
		next = max(next, e.Serial)
	}
	next++
	rolledBack, err := withSerial(target, next)
	if err != nil {
		return 0, err
	}
	if live.State != nil {
		_, err = store.Save(ctx, rolledBack)
	} else {
		// A live state that is lost or unreadable is replaced.
		err = store.Replace(ctx, rolledBack)
	}
	if err != nil {
		return 0, fmt.Errorf("writing the rolled back state: %w", err)
	}
	return next, nil
}

// withSerial is state with its serial set, everything else as it was.
func withSerial(state []byte, serial int64) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(state, &fields); err != nil {
		return nil, fmt.Errorf("%w: %v", tfstate.ErrInvalid, err)
	}
	fields["serial"] = json.RawMessage(strconv.FormatInt(serial, 10))
	return json.MarshalIndent(fields, "", "  ")
}

func serials(entries []tfstate.HistoryEntry) string {
	if len(entries) == 0 {
		return "none"
	}
	s := ""
	for i, e := range entries {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatInt(e.Serial, 10)
	}
	return s
}
