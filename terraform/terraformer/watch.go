package terraformer

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/state"
)

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
	store    *state.StateStore
	interval time.Duration
	watcher  *fsnotify.Watcher
	dirty    chan struct{}
	stopping chan struct{}
	done     chan struct{}
}

func watchState(ctx context.Context, path string, store *state.StateStore, interval time.Duration) (*stateWatcher, error) {
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
	for range w.dirty {
		wait := time.Until(saved.Add(w.interval))
		if wait < 0 {
			wait = 0
		}
		select {
		case <-w.stopping:
			// The final save follows.
			continue
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

// stop ends watching; what changed since the last save is for the final save.
func (w *stateWatcher) stop() {
	close(w.stopping)
	_ = w.watcher.Close()
	<-w.done
}
