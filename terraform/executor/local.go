package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/run/termination"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// LocalExecutor runs terraform on this machine, the terraformer's part of a run in this
// process, in a working directory private to each run ID that outlives the run, so that a
// state a killed run could not save is recovered by the next. A run in this process
// starts no terraformer process: that would cost its start and a new connection to the
// API server, a tenth of a run that finds nothing to change.
type LocalExecutor struct {
	// Client reads and writes the run objects and the state; it must not cache ConfigMaps
	// and Secrets.
	Client client.Client
	// Settings go to every run as they are, with a request's own parallelism:
	// Settings.Terraform is the terraform binary of the pinned version; the runs write
	// their progress, and it is read, every Settings.ProgressInterval.
	Settings terraformer.Settings
	// BaseDir holds one directory per run ID.
	BaseDir string
	// Output receives terraform's output, and how a run failed; discarded when nil.
	Output io.Writer
	// RunTimeout, when set, bounds a run: then it is stopped as a shutdown stops it
	// (terraform interrupted, the state saved) and fails with ErrRunDeadline.
	RunTimeout time.Duration
	// State is how the runs keep their states.
	State state.Options
	// CredentialRefresh is how often a run reads the Secrets of its credential files
	// (run.Request.Files) again, to write what changed; defaultCredentialRefresh when zero.
	CredentialRefresh time.Duration

	guard     runGuard
	lifecycle lifecycle
}

var _ Executor = (*LocalExecutor)(nil)

// Run runs the request and waits for it. Cancelling ctx interrupts terraform, and waits
// for it to stop and for the state to be saved.
func (e *LocalExecutor) Run(ctx context.Context, req run.Request) (*run.Result, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if e.Client == nil {
		return nil, run.InvalidInput("client", "must be set")
	}
	tracing.Set(trace.SpanFromContext(ctx), attribute.String("terraseed.executor", "local"))
	if err := e.lifecycle.enter(ctx); err != nil {
		return nil, err
	}
	defer e.lifecycle.leave()
	release, err := e.guard.acquire(req)
	if err != nil {
		return nil, err
	}
	defer release()

	// What runs of a killed controller process left working goes before anything else
	// runs beside it. Ending it fails no run.
	if n, err := endLeftoverGroups(e.BaseDir); n > 0 || err != nil {
		logf.FromContext(ctx).Info("leftoverProcessesEnded", "processes", n, "error", fmt.Sprint(err))
	}
	dir, tmp, err := e.runDirs(req.ID)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// What an earlier run reported is not this run's.
	report := report.File(reportFileOf(dir))
	if err := report.Clear(ctx); err != nil {
		return nil, err
	}
	// In the run's temporary directory, gone with it: a token is kept no longer than it
	// is used.
	files, stopRefreshing, err := credentialFiles(ctx, e.Client, req.ID.Namespace, tmp, req.Files, e.CredentialRefresh)
	if err != nil {
		return nil, err
	}
	defer stopRefreshing()
	output := &syncWriter{w: cmp.Or[io.Writer](e.Output, io.Discard)}
	r := e.runner(req, dir, tmp, output)
	for name, path := range files {
		r.Env = append(r.Env, name+"="+path)
	}
	logf.FromContext(ctx).V(1).Info("runStarting", "command", req.Command, "workDir", r.WorkDir)
	runCtx, started := ctx, time.Now()
	if e.RunTimeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, e.RunTimeout, ErrRunDeadline)
		defer cancel()
	}
	stopProgress := followProgress(ctx, report, req, started, e.Settings.ProgressInterval, e.RunTimeout)
	result, err := r.Run(runCtx)
	last := stopProgress()
	if err != nil {
		re := termination.ErrorOf(r.Phases(), err)
		if ctx.Err() == nil && errors.Is(context.Cause(runCtx), ErrRunDeadline) {
			re.Message = fmt.Sprintf("%s: running for more than %s; it was stopped and its state saved", ErrRunDeadline, e.RunTimeout)
			re.Err = errors.Join(ErrRunDeadline, re.Err)
			addProgressAtDeadline(re, last)
		}
		addInterrupted(ctx, report, re)
		fmt.Fprintln(output, "run failed:", re.Error())
		return nil, re
	}
	return withPlan(ctx, report, req, result)
}

// runDirs makes the run directory of id (kept between runs) and its home, after removing
// those of earlier owners of the name, and a temporary directory for this run alone.
func (e *LocalExecutor) runDirs(id run.ID) (dir, tmp string, err error) {
	dir = filepath.Join(e.BaseDir, id.Dir())
	if err := e.removeOtherOwners(id); err != nil {
		return "", "", err
	}
	for _, d := range []string{dir, homeOf(dir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", fmt.Errorf("creating the run directory: %w", err)
		}
	}
	// A short path: provider plugins put their sockets there, whose paths are bounded.
	if tmp, err = os.MkdirTemp("", "terraseed-run-"); err != nil {
		return "", "", fmt.Errorf("creating the run's temporary directory: %w", err)
	}
	return dir, tmp, nil
}

// runner is the Runner of req in the run directory dir: the executor's settings, with
// the request's parallelism when it has one.
func (e *LocalExecutor) runner(req run.Request, dir, tmp string, output io.Writer) *terraformer.Runner {
	settings := e.Settings
	settings.Parallelism = cmp.Or(req.Parallelism, settings.Parallelism)
	r := &terraformer.Runner{
		Client:  e.Client,
		Objects: e.State.Objects(req.ID),
		Command: req.Command,
		WorkDir: workDirOf(dir),
		// The working directory outlives the run: a run killed between two saves leaves
		// its newest state there for the next.
		StateSaveInterval: localStateSaveInterval,
		Settings:          settings,
		Stdout:            output,
		Stderr:            output,
		ProtectedTypes:    req.ProtectedTypes,
		AllowDestroy:      req.AllowDestroy,
		AllowDestroyPlan:  req.AllowDestroyPlan,
		ReportFile:        reportFileOf(dir),
		Env:               runEnv(homeOf(dir), tmp, req.Env),
	}
	if req.Background {
		r.Nice = backgroundNice
	}
	return r
}

var _ cleaner = (*LocalExecutor)(nil)

// Clean removes the run directories of every owner of id's name, once the object is gone
// and no run of it is under way.
func (e *LocalExecutor) Clean(ctx context.Context, id run.ID) error {
	// The run lock alone: the directories are this machine's, which no former leader's
	// run uses.
	if active, err := e.runLockHeld(id); err != nil || active {
		return errors.Join(err, inProgress("", fmt.Sprintf("%s: the run directory is in use", run.ErrRunInProgress)))
	}
	return os.RemoveAll(filepath.Join(e.BaseDir, id.OwnersDir()))
}

// removeOtherOwners removes, before the first run of an owner, what runs of earlier owners
// of the same name left (and the directory of a release that kept none per owner): a new
// object must never take over the state of an object that is gone. A directory a run
// still holds stays.
func (e *LocalExecutor) removeOtherOwners(id run.ID) error {
	if id.UID == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(e.BaseDir, id.Dir())); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	owners := filepath.Join(e.BaseDir, id.OwnersDir())
	entries, err := os.ReadDir(owners)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, entry := range entries {
		other := filepath.Join(owners, entry.Name())
		if held, err := runLockHeld(workDirOf(other)); err != nil || held {
			continue
		}
		if err := os.RemoveAll(other); err != nil {
			return fmt.Errorf("removing the run directory of an earlier owner: %w", err)
		}
	}
	return nil
}

var _ activityChecker = (*LocalExecutor)(nil)

// Active is true while a run holds the working directory of a run of id (the run lock),
// also one an earlier controller process started: its terraform holds the lock until it
// has stopped. After a takeover it is true for every id until the hold is over
// (HoldRunsUntil): the former leader's runs, on another machine, hold no lock here, and
// only the hold tells when they have stopped and saved. What writes or deletes a state
// without a run (a forced deletion, a migration) waits for them so.
func (e *LocalExecutor) Active(_ context.Context, id run.ID) (bool, error) {
	if e.lifecycle.holding() {
		return true, nil
	}
	return e.runLockHeld(id)
}

// runLockHeld is true while a run holds the run lock of the working directory of id.
func (e *LocalExecutor) runLockHeld(id run.ID) (bool, error) {
	return runLockHeld(workDirOf(filepath.Join(e.BaseDir, id.Dir())))
}

// runLockHeld is true while a run holds the working directory's run lock.
func runLockHeld(workDir string) (bool, error) {
	path := filepath.Join(workDir, terraformer.RunLockFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	lock := flock.New(path)
	locked, err := lock.TryLock()
	if err != nil {
		return false, fmt.Errorf("reading the run lock: %w", err)
	}
	if !locked {
		return true, nil
	}
	return false, lock.Unlock()
}

// localStateSaveInterval is the least time between two saves of a local run's state while
// terraform runs.
const localStateSaveInterval = time.Second

// backgroundNice is the nice value of a background run's processes.
const backgroundNice = 10

// reportFileOf is where a run reports its progress and plan within a run directory.
func reportFileOf(runDir string) string { return filepath.Join(runDir, "report.json") }

// workDirOf is terraform's working directory within a run directory.
func workDirOf(runDir string) string { return filepath.Join(runDir, "work") }

// homeOf is a run's HOME within its run directory.
func homeOf(runDir string) string { return filepath.Join(runDir, "home") }

// runEnv is the terraformer's environment: what a process needs to run, the run's own HOME
// and TMPDIR (provider plugins keep their caches there, not in the controller's), and the
// request's credentials; never the controller's own environment.
func runEnv(home, tmp string, credentials map[string]string) []string {
	env := []string{"HOME=" + home, "TMPDIR=" + tmp}
	if v, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+v)
	}
	for k, v := range credentials {
		env = append(env, k+"="+v)
	}
	return env
}

// syncWriter lets terraform's output and its errors, copied by separate goroutines, share
// one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
