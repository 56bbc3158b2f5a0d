package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
)

// Stored is the state object as found: whether it exists, and its state or why that is
// invalid. It carries no index: the one kept with the state (AnnotationIndex) is
// written by the runs, and never trusted.
type Stored struct {
	Exists bool
	// State is the decoded state; nil when the object holds none or it is invalid.
	State []byte
	// Unreadable says why the state is invalid: not a terraform state, corrupt (a digest
	// mismatch, broken gzip), never one that could not be read now.
	Unreadable error
	// Serial and Lineage are the state's; empty when it has none.
	Serial  int64
	Lineage string
}

// Inspect reads the stored state as it is, for a caller that decides whether it is lost:
// absent, empty, invalid (Stored.Unreadable) or older than its index. A state that cannot
// be read now is none of these, and is an error: the API server does not answer
// (ErrNotReadNow), a part is missing even when the object and its parts are read again
// (ErrNotReadNow), or the state expands beyond what this store decodes (ErrOverBound).
func (s *Store) Inspect(ctx context.Context) (*Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cm, err := s.get(ctx)
	if apierrors.IsNotFound(err) {
		return &Stored{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s %s: %w", ErrNotReadNow, s.storage().Kind(), s.Objects.StateName(), err)
	}
	cm, state, err := s.decodeAgain(ctx, cm, s.get)
	switch {
	case err == nil:
	case errors.Is(err, ErrOverBound):
		return nil, err
	case errors.Is(err, errTooLarge):
		return nil, fmt.Errorf("%w: %s %s: the state expands to more than %d bytes (%d MiB), the most a state may take",
			ErrOverBound, s.storage().Kind(), s.Objects.StateName(), MaxSize, MaxSize>>20)
	case errors.Is(err, ErrCorrupt):
		return &Stored{Exists: true, Unreadable: err}, nil
	default:
		return nil, err
	}
	found := &Stored{Exists: true}
	if len(bytes.TrimSpace(state)) == 0 {
		return found, nil
	}
	m, err := parseStateMeta(state)
	if err != nil {
		found.Unreadable = fmt.Errorf("%w: %s %s: %w", ErrCorrupt, cm.kind(), cm.GetName(), err)
		return found, nil
	}
	found.State, found.Serial, found.Lineage = state, m.Serial, m.Lineage
	return found, nil
}

// Replace stores state, or an empty state when nil, whatever the store holds: for a
// stored state that is lost or corrupt, and that a recovered one replaces. It is the one
// write that may go back in serial, and is never used while a run owns the state.
func (s *Store) Replace(ctx context.Context, state []byte) error {
	var m stateMeta
	if len(state) > 0 {
		var err error
		if m, err = parseStateMeta(state); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := s.getOrNew(ctx)
		if err != nil {
			return err
		}
		return s.write(ctx, cm, state, m)
	})
	if err != nil {
		return err
	}
	s.known, s.knownVersion = m, s.last.GetResourceVersion()
	return nil
}
