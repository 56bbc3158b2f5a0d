package terraformer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gofrs/flock"

	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// RunLockFile, in the working directory, is locked by the run that works in it.
const RunLockFile = ".terraseed-run.lock"

// lockWorkDir keeps a second run from starting in the same working directory while the
// first still runs, also one of another process (a restarted controller beside the
// terraformer process of a run of its predecessor's).
func (r *Runner) lockWorkDir() (unlock func(), err error) {
	if err := os.MkdirAll(r.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the working directory: %w", err)
	}
	runLock := flock.New(filepath.Join(r.WorkDir, RunLockFile))
	if locked, err := runLock.TryLock(); err != nil || !locked {
		return nil, &run.Error{Command: string(r.Command), Message: run.ErrRunInProgress.Error(), Err: errors.Join(run.ErrRunInProgress, err)}
	}
	return func() { _ = runLock.Unlock() }, nil
}

func (r *Runner) statePath() string { return filepath.Join(r.WorkDir, state.Key) }

// writeFiles replaces the terraform files of the working directory by the configured ones.
func (r *Runner) writeFiles(ctx context.Context) error {
	files, err := r.Objects.ReadFiles(ctx, r.Client, r.Command.WritesState())
	if err != nil {
		return err
	}
	if err := r.takeImportIDs(files); err != nil {
		return err
	}
	if err := r.takePurge(files); err != nil {
		return err
	}
	for name := range files {
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") || name == state.Key {
			return run.InvalidInput(fmt.Sprintf("ConfigMap %s key %q", r.Objects.ConfigName(), name), "must be a plain terraform file name")
		}
	}
	old, err := filepath.Glob(filepath.Join(r.WorkDir, "*.tf*"))
	if err != nil {
		return err
	}
	for _, path := range old {
		if base := filepath.Base(path); base != state.Key && !strings.HasPrefix(base, state.Key+".") {
			if err := os.Remove(path); err != nil {
				return err
			}
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(r.WorkDir, name), content, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	r.configuration = filesDigest(files)
	return nil
}

// filesDigest identifies a configuration: its files and variables, by name and content.
func filesDigest(files map[string][]byte) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", name, len(files[name]), files[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// takeImportIDs takes the provider's import ID templates out of the configuration, and
// has the store index every state it saves with them.
func (r *Runner) takeImportIDs(files map[string][]byte) error {
	declared, ok := files[imports.IDsKey]
	if !ok {
		r.imports = importsAny(files)
		return nil
	}
	delete(files, imports.IDsKey)
	r.imports = importsAny(files)
	var templates map[string]string
	if err := json.Unmarshal(declared, &templates); err != nil {
		return run.InvalidInput(fmt.Sprintf("ConfigMap %s key %q", r.Objects.ConfigName(), imports.IDsKey), err.Error())
	}
	ids, err := imports.ParseIDs(templates)
	if err != nil {
		return run.InvalidInput(fmt.Sprintf("ConfigMap %s key %q", r.Objects.ConfigName(), imports.IDsKey), err.Error())
	}
	r.store.SetImportIDs(ids)
	return nil
}

// importsAny says whether the configuration imports resources, adopted or recovered.
func importsAny(files map[string][]byte) bool {
	_, adopts := files[imports.File]
	_, recovers := files[imports.RecoveredFile]
	return adopts || recovers
}
