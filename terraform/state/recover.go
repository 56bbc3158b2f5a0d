package state

import (
	"bytes"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"

	"github.com/terraseed/terraseed/terraform/imports"
)

// Stored is the state object as found: whether it exists, its state or why that
// cannot be read, and the index kept with it.
type Stored struct {
	Exists bool
	// State is the decoded state; nil when the object holds none or it cannot be read.
	State []byte
	// Unreadable says why the state cannot be read (corrupt, truncated, not a state).
	Unreadable error
	Index      *imports.Index
	// Serial and Lineage are the state's; empty when it has none.
	Serial  int64
	Lineage string
}

// Inspect reads the stored state as it is, for a caller that decides whether it is lost;
// only a failure to reach the API server is an error.
func (s *Store) Inspect(ctx context.Context) (*Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cm, err := s.get(ctx)
	if apierrors.IsNotFound(err) {
		return &Stored{}, nil
	}
	if err != nil {
		return nil, err
	}
	found := &Stored{Exists: true, Index: storedIndex(cm)}
	state, err := s.decode(ctx, cm)
	if err != nil {
		found.Unreadable = err
		return found, nil
	}
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
