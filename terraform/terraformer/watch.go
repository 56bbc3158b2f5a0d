package terraformer

import (
	"context"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/state"
)

// stateWatcher writes the state file back to the store while terraform runs. terraform
// rewrites the file in place after every resource; a burst of writes while a save is in
// flight collapses into one more save of the newest file.
type stateWatcher struct {
	path    string
	store   *state.StateStore
	watcher *fsnotify.Watcher
	dirty   chan struct{}
	done    chan struct{}
}

func watchState(ctx context.Context, path string, store *state.StateStore) (*stateWatcher, error) {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	// The directory, not the file: the file may not exist yet.
	if err := watcher.Add(filepath.Dir(path)); err != nil {
		_ = watcher.Close()
		return nil, err
	}
	w := &stateWatcher{path: path, store: store, watcher: watcher, dirty: make(chan struct{}, 1), done: make(chan struct{})}
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
	for range w.dirty {
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

// stop ends watching once every noticed change has been handled.
func (w *stateWatcher) stop() {
	_ = w.watcher.Close()
	<-w.done
}
