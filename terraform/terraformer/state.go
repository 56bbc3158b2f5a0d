package terraformer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/util/wait"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/state"
)

// errStateNotSaved is returned when the state could not be written back to the API server.
var errStateNotSaved = errors.New("the terraform state could not be saved")

// prepareState puts the newest known state into the working directory: the stored one,
// or the one a killed run left behind when that is newer and of the same lineage.
func (r *Runner) prepareState(ctx context.Context, filesRead <-chan struct{}) error {
	load := r.store.Load
	if r.Command.WritesState() {
		load = r.store.Claim
	}
	stored, err := load(ctx)
	if err != nil {
		return err
	}
	local, err := os.ReadFile(r.statePath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading the state file: %w", err)
	}
	if len(local) > 0 {
		// The store writes only a newer state of the same lineage: anything else here is
		// replaced by the stored state.
		select {
		case <-filesRead:
		case <-ctx.Done():
			return ctx.Err()
		}
		recovered, err := r.store.Save(ctx, local)
		switch {
		case recovered:
			logf.FromContext(ctx).Info("recoveredLocalState")
			r.priorResources = holdsResources(local)
			return nil
		case err != nil && !errors.Is(err, state.ErrInvalid) && !errors.Is(err, state.ErrLineageMismatch) && !errors.Is(err, state.ErrStale):
			return fmt.Errorf("%w: %w", errStateNotSaved, err)
		}
	}
	r.priorResources = holdsResources(stored)
	if len(stored) == 0 {
		if err := os.Remove(r.statePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(r.statePath(), stored, 0o600)
}

// holdsResources says whether a state lists any resource; an empty or unreadable one
// does not, and neither does a state of an empty configuration or one destroyed.
func holdsResources(state []byte) bool {
	var s struct {
		Resources []anyValue `json:"resources"`
	}
	return json.Unmarshal(state, &s) == nil && len(s.Resources) > 0
}

// anyValue is a JSON value counted, never kept: a list of them takes no memory however
// long it is, where a copy of each would take many times the state.
type anyValue struct{}

func (*anyValue) UnmarshalJSON([]byte) error { return nil }

// finalSave writes the state once more after terraform exited, retrying for as long as
// FinalSaveTimeout allows. A save that still fails fails the run naming its error, and
// nothing of the state is written anywhere else: a run's output goes to the seed's
// logging stack, and a state holds secrets. The state stays in the working directory,
// where the next run of a working directory that outlives this one takes it from, and the
// stored state with its index and history covers what it held otherwise.
func (r *Runner) finalSave(ctx context.Context) error {
	saved, err := os.ReadFile(r.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: reading the state file: %w", errStateNotSaved, err)
	}
	timeout := r.FinalSaveTimeout
	if timeout == 0 {
		timeout = DefaultFinalSaveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	attempts := 0
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 10 * time.Second}
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		attempts++
		_, lastErr = r.store.Save(ctx, saved)
		// A newer stored state stays newer: the run fails naming it.
		if errors.Is(lastErr, state.ErrInvalid) || errors.Is(lastErr, state.ErrLineageMismatch) || errors.Is(lastErr, state.ErrStale) {
			return false, lastErr
		}
		return lastErr == nil, nil
	})
	if err == nil {
		return nil
	}
	if lastErr == nil {
		lastErr = err
	}
	// Only that the save failed and why: never the state.
	logf.FromContext(ctx).Info("finalSaveFailed", "attempts", attempts, "timeout", timeout.String(), "stateFile", r.statePath(), "stateBytes", len(saved), "reason", lastErr.Error())
	return fmt.Errorf("%w: retried for the final save timeout of %s: %w", errStateNotSaved, timeout, lastErr)
}

// stateWatcher writes the state file back to the store while terraform runs. terraform
// rewrites the file in place after every resource, and every such state is saved as it is
// written: a run killed right after terraform recorded a resource (its ID, which a rerun
// needs to find the resource again) has it in the stored state. Writes while a save is
// in flight collapse into one next save of the newest file, never dropped: the next save
// reads the file after the last write it was told of. What changed since the last save
// is saved by the run's final save.
//
// A run whose working directory outlives it (the local executor's) may save less often,
// at most once an interval: killed, it leaves its newest state in the directory, where
// the next run takes it from. That spares the API server a write per resource.
type stateWatcher struct {
	path     string
	store    *state.Store
	interval time.Duration
	watcher  *fsnotify.Watcher
	dirty    chan struct{}
	stopping chan struct{}
	done     chan struct{}
}

func watchState(ctx context.Context, path string, store *state.Store, interval time.Duration) (*stateWatcher, error) {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	// The directory, not the file: the file may not exist yet.
	if err := watcher.Add(filepath.Dir(path)); err != nil {
		_ = watcher.Close()
		return nil, err
	}
	w := &stateWatcher{path: path, store: store, interval: interval, watcher: watcher, dirty: make(chan struct{}, 1), stopping: make(chan struct{}), done: make(chan struct{})}
	go w.notice()
	go w.persist(ctx)
	return w, nil
}

func (w *stateWatcher) notice() {
	defer close(w.dirty)
	for {
		select {
		case event, ok := <-w.watcher.Events:
			if !ok {
				return
			}
			if event.Name == w.path && event.Has(fsnotify.Write|fsnotify.Create) {
				select {
				case w.dirty <- struct{}{}:
				default:
				}
			}
		case _, ok := <-w.watcher.Errors:
			if !ok {
				return
			}
		}
	}
}

func (w *stateWatcher) persist(ctx context.Context) {
	defer close(w.done)
	log := logf.FromContext(ctx)
	var saved time.Time
	// dirty holds at most one change: those raised while a save is in flight make one.
	for {
		select {
		case <-w.stopping:
			// The final save follows.
			return
		case _, ok := <-w.dirty:
			if !ok {
				return
			}
		}
		wait := time.Until(saved.Add(w.interval))
		if wait < 0 {
			wait = 0
		}
		select {
		case <-w.stopping:
			return
		case <-time.After(wait):
		}
		saved = time.Now()
		state, err := os.ReadFile(w.path)
		if err != nil || len(state) == 0 {
			continue
		}
		// A partial file (terraform is mid-write) fails to parse and is skipped: the rest
		// of the write raises another event.
		if _, err := w.store.Save(ctx, state); err != nil {
			log.V(1).Info("stateNotSavedYet", "reason", err.Error())
		}
	}
}

// stop ends watching once a save in flight is done; what changed since the last save is
// for the final save. The watch is closed in the background: the kernel takes 5-15 ms to
// release an inotify instance, which a run need not wait for.
func (w *stateWatcher) stop() {
	close(w.stopping)
	go func() { _ = w.watcher.Close() }()
	<-w.done
}
