package terraformer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/hashicorp/terraform-exec/tfexec"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// DefaultFinalSaveTimeout bounds the retries of the last state save after terraform exits.
const DefaultFinalSaveTimeout = run.DefaultFinalSaveTimeout

// Runner runs one terraform command of one run in a working directory: in a run
// pod's terraformer process (cmd/terraformer), or in the controller's own process for the
// local executor, where runs of other working directories go on beside it.
type Runner struct {
	Client  client.Client
	Objects state.RunObjects
	Command run.Command
	// WorkDir is private to this run; a state left there by a killed run is recovered
	// when it is newer than the stored one.
	WorkDir string
	// StateSaveInterval is the least time between two saves of the state while terraform
	// runs. Zero saves every state terraform writes as it is written, which a run needs
	// whose working directory dies with it (a run pod); a run whose working directory
	// outlives it may save less often, its next run taking a newer state from there.
	StateSaveInterval time.Duration
	// TerraformPath is the terraform binary (see FindTerraform); a run of another version fails.
	TerraformPath string
	// OpenTofu says that TerraformPath is OpenTofu of run.OpenTofuVersion instead.
	OpenTofu bool
	Plugins  run.Plugins
	// Parallelism limits concurrent operations of apply and destroy; zero keeps terraform's default.
	Parallelism int
	// Stdout and Stderr receive terraform's output.
	Stdout, Stderr io.Writer
	// StateFallback receives the state when it cannot be saved to the API server.
	StateFallback io.Writer
	// FinalSaveTimeout bounds the last save; DefaultFinalSaveTimeout when zero.
	FinalSaveTimeout time.Duration
	// StopTimeout bounds the wait for terraform after an interrupt; run.DefaultStopTimeout when zero.
	StopTimeout time.Duration
	// ProtectedTypes are resource types an apply must not destroy or replace unless
	// AllowDestroy is set; the run then fails with ErrDestroyProtected before changing anything.
	ProtectedTypes []string
	AllowDestroy   bool
	// AllowDestroyPlan, when set, lets exactly the plan of this digest destroy or replace
	// protected resources: the apply then applies the very plan it checked.
	AllowDestroyPlan string
	// ProgressInterval is how often at most the progress is written; DefaultProgressInterval when zero.
	ProgressInterval time.Duration
	// ReportFile, when set, receives the progress and the plan instead of the annotations
	// of the configuration ConfigMap: for a run on the machine of the executor that reads it.
	ReportFile string
	// Env is the environment terraform runs in (the credentials among it); this process's
	// own when nil.
	Env []string
	// Nice, when not zero, is the nice value of the run's terraform processes, which their
	// providers inherit: a run others need not wait for yields the CPU to those they do.
	Nice int

	store  *state.StateStore
	phases run.Phases
	// terraformStarted is when the run's first terraform command started.
	terraformStarted time.Time
	tracker          *tracker
	// configuration is the digest of the files and variables of the run, for its plan's digest.
	configuration string
	// priorResources is whether the state the run starts from holds any resource.
	priorResources bool
	// imports is whether the configuration imports resources: an imported resource the
	// plan would replace is destroyed as surely as one the state held.
	imports   bool
	cliConfig string
	// stderr receives terraform's errors: the run's Stderr and a copy a failure reads.
	stderr io.Writer
}

// Phases is how long each terraform command of the last Run took.
func (r *Runner) Phases() run.Phases { return r.phases }

// TerraformStarted is when the last Run started its first terraform command; zero when
// it started none.
func (r *Runner) TerraformStarted() time.Time { return r.terraformStarted }

// timed runs one terraform command as the phase of that name.
func (r *Runner) timed(phase string, command func() error) error {
	started := time.Now()
	if r.terraformStarted.IsZero() {
		r.terraformStarted = started
	}
	err := command()
	r.phases[phase] = time.Since(started)
	return err
}

// Run executes the command. Cancelling ctx interrupts terraform, which then stops
// cleanly; the state is saved in any case.
func (r *Runner) Run(ctx context.Context) (*run.Result, error) {
	if err := r.checkInput(); err != nil {
		return nil, err
	}
	r.phases, r.terraformStarted = run.Phases{}, time.Time{}
	id := r.Objects.ID
	log := logf.FromContext(ctx).WithValues("command", r.Command, "infrastructure", id.Namespace+"/"+id.Name, "purpose", id.Purpose)
	ctx = logf.IntoContext(ctx, log)
	// API calls that must finish even after an interrupt use this context.
	persistCtx := context.WithoutCancel(ctx)
	r.store = r.Objects.StateStore(r.Client)

	unlock, err := r.lockWorkDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	tf, stderr, err := r.prepare(ctx)
	if err != nil {
		return nil, err
	}
	var watcher *stateWatcher
	if r.Command.WritesState() {
		if watcher, err = watchState(persistCtx, r.statePath(), r.store, r.StateSaveInterval); err != nil {
			return nil, fmt.Errorf("watching the state file: %w", err)
		}
	}
	log.Info("terraformStarted")
	if r.Command != run.Validate {
		r.tracker = newTracker(persistCtx, r.Command, orDiscard(r.Stdout), r.ProgressInterval, r.report())
		r.tracker.setConfiguration(r.configuration)
	}
	result := &run.Result{}
	runErr := r.execute(ctx, tf, result)
	if runErr != nil {
		// The next run initialises again, in case the working directory was the cause.
		forgetInit(r.WorkDir)
	}
	if err := r.save(persistCtx, watcher, result); err != nil {
		return nil, errors.Join(err, runErr)
	}
	if runErr != nil {
		return nil, r.failure(ctx, runErr, stderr.String())
	}
	if err := r.finish(persistCtx, result); err != nil {
		return nil, err
	}
	log.Info("terraformSucceeded", "stateWrites", result.StateWrites)
	return result, nil
}

// checkInput names the field of a run that can never work.
func (r *Runner) checkInput() error {
	if err := r.Objects.ID.Validate(); err != nil {
		return err
	}
	if _, err := run.ParseCommand(string(r.Command)); err != nil {
		return err
	}
	if r.WorkDir == "" {
		return run.InvalidInput("workDir", "must not be empty")
	}
	if r.TerraformPath == "" {
		return run.InvalidInput("terraformPath", "must not be empty")
	}
	return nil
}

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

// prepare makes the working directory ready for the command: the binary checked, the
// configuration and the state in place, terraform initialised.
func (r *Runner) prepare(ctx context.Context) (*tfexec.Terraform, *bytes.Buffer, error) {
	tf, stderr, err := r.terraform()
	if err != nil {
		return nil, nil, err
	}
	// The `terraform version` that checks the binary runs while the run's objects are read,
	// unless it checked this binary in this working directory before.
	versionChecked := make(chan error, 1)
	if r.versionChecked() {
		versionChecked <- nil
	} else {
		go func() { versionChecked <- r.checkVersion(ctx, tf) }()
	}
	checkedVersion := sync.OnceValue(func() error { return <-versionChecked })
	defer func() { _ = checkedVersion() }()
	// The configuration and the state are read side by side: a run that finds nothing to
	// change is little more than these reads and one terraform process.
	prepared, prepareCtx := errgroup.WithContext(ctx)
	// A state the last run left here is saved only once the import IDs are known, so
	// that it is saved with its index.
	filesRead := make(chan struct{})
	prepared.Go(func() error {
		defer close(filesRead)
		return r.writeFiles(prepareCtx)
	})
	if r.Command != run.Validate {
		prepared.Go(func() error { return r.prepareState(prepareCtx, filesRead) })
	}
	if err := prepared.Wait(); err != nil {
		return nil, nil, err
	}
	if err := checkedVersion(); err != nil {
		return nil, nil, err
	}
	tf.SetStdout(orDiscard(r.Stdout))
	if err := r.init(ctx, tf); err != nil {
		return nil, nil, run.NewError("init", stderr.String(), err)
	}
	return tf, stderr, nil
}

// report is where the run's progress and plan go, where the executor reads them: the
// report file beside the controller, else the annotations of the configuration ConfigMap.
func (r *Runner) report() run.ReportTransport {
	if r.ReportFile != "" {
		return run.ReportFile(r.ReportFile)
	}
	return run.ReportAnnotations{Client: r.Client, ID: r.Objects.ID}
}

// save saves the state once more after terraform exited, while the last progress and
// the plan are written.
func (r *Runner) save(ctx context.Context, watcher *stateWatcher, result *run.Result) error {
	trackerStopped := make(chan struct{})
	go func() {
		defer close(trackerStopped)
		if r.tracker != nil {
			r.tracker.stop(ctx)
			result.Plan = r.tracker.Plan()
		}
	}()
	var saveErr error
	if watcher != nil {
		watcher.stop()
		saveErr = r.finalSave(ctx)
	}
	<-trackerStopped
	result.StateWrites = r.store.Writes()
	return saveErr
}

// failure is the error of a command that failed, with terraform's own error blocks.
func (r *Runner) failure(ctx context.Context, runErr error, stderr string) error {
	if ctx.Err() != nil {
		return &run.Error{Command: string(r.Command), Message: "interrupted; the state was saved", Err: errors.Join(ctx.Err(), runErr)}
	}
	var validation *run.Error
	if errors.As(runErr, &validation) {
		return validation
	}
	// In JSON mode terraform reports its errors as diagnostics on stdout.
	if blocks := r.tracker.errorBlocks(); len(blocks) > 0 {
		return run.ErrorOfBlocks(string(r.Command), blocks, errors.Join(run.ErrTerraformFailed, runErr))
	}
	return run.NewError(string(r.Command), stderr, runErr)
}

// finish reads the outputs of the saved state into result, and after a destroy
// releases the run objects.
func (r *Runner) finish(ctx context.Context, result *run.Result) error {
	result.Phases = r.phases
	if r.Command != run.Validate {
		saved, err := os.ReadFile(r.statePath())
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("reading the state file: %w", err)
		}
		if result.Outputs, err = state.Outputs(saved); err != nil {
			return err
		}
		result.State = saved
	}
	if r.Command == run.Destroy {
		// A run pod may not write Secrets (its ClusterRole grants get only): the pod
		// executor releases what the run could not.
		if err := r.Objects.RemoveFinalizers(ctx, r.Client); err != nil && !apierrors.IsForbidden(err) {
			return err
		}
	}
	return nil
}

func (r *Runner) statePath() string { return filepath.Join(r.WorkDir, state.StateKey) }

// writeFiles replaces the terraform files of the working directory by the configured ones.
func (r *Runner) writeFiles(ctx context.Context) error {
	files, err := r.Objects.ReadFiles(ctx, r.Client, r.Command.WritesState())
	if err != nil {
		return err
	}
	if err := r.takeImportIDs(files); err != nil {
		return err
	}
	for name := range files {
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") || name == state.StateKey {
			return run.InvalidInput(fmt.Sprintf("ConfigMap %s key %q", r.Objects.ConfigName(), name), "must be a plain terraform file name")
		}
	}
	old, err := filepath.Glob(filepath.Join(r.WorkDir, "*.tf*"))
	if err != nil {
		return err
	}
	for _, path := range old {
		if base := filepath.Base(path); base != state.StateKey && !strings.HasPrefix(base, state.StateKey+".") {
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
	declared, ok := files[state.ImportIDsKey]
	if !ok {
		_, r.imports = files[state.ImportsFile]
		return nil
	}
	delete(files, state.ImportIDsKey)
	_, r.imports = files[state.ImportsFile]
	var templates map[string]string
	if err := json.Unmarshal(declared, &templates); err != nil {
		return run.InvalidInput(fmt.Sprintf("ConfigMap %s key %q", r.Objects.ConfigName(), state.ImportIDsKey), err.Error())
	}
	ids, err := state.ParseImportIDs(templates)
	if err != nil {
		return run.InvalidInput(fmt.Sprintf("ConfigMap %s key %q", r.Objects.ConfigName(), state.ImportIDsKey), err.Error())
	}
	r.store.SetImportIDs(ids)
	return nil
}

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
		case err != nil && !errors.Is(err, state.ErrInvalidState) && !errors.Is(err, state.ErrLineageMismatch) && !errors.Is(err, state.ErrStaleState):
			return fmt.Errorf("%w: %w", run.ErrStateNotSaved, err)
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
		Resources []json.RawMessage `json:"resources"`
	}
	return json.Unmarshal(state, &s) == nil && len(s.Resources) > 0
}

func (r *Runner) terraform() (*tfexec.Terraform, *bytes.Buffer, error) {
	tf, err := tfexec.NewTerraform(r.WorkDir, r.TerraformPath)
	if err != nil {
		return nil, nil, fmt.Errorf("preparing terraform: %w", err)
	}
	stderr := &bytes.Buffer{}
	// `terraform version -json` is of no interest in the run's output.
	tf.SetStdout(io.Discard)
	r.stderr = io.MultiWriter(orDiscard(r.Stderr), stderr)
	tf.SetStderr(r.stderr)
	if err := tf.SetWaitDelay(r.stopTimeout()); err != nil {
		return nil, nil, err
	}
	cliConfig, err := plugins(r.Plugins).writeCLIConfig(r.WorkDir)
	if err != nil {
		return nil, nil, err
	}
	r.cliConfig = cliConfig
	// The commands terraform-exec runs (version, init, validate) read no variables: it
	// refuses to be given TF_VAR_* and the like, and sets what it sets itself.
	env := map[string]string{}
	for _, kv := range r.terraformEnv() {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	env["TF_CLI_CONFIG_FILE"] = cliConfig
	if err := tf.SetEnv(tfexec.CleanEnv(env)); err != nil {
		return nil, nil, err
	}
	return tf, stderr, nil
}

func (r *Runner) stopTimeout() time.Duration {
	if r.StopTimeout == 0 {
		return run.DefaultStopTimeout
	}
	return r.StopTimeout
}

// checkVersion refuses a binary of another version, and records a binary it accepted in
// the working directory.
func (r *Runner) checkVersion(ctx context.Context, tf *tfexec.Terraform) error {
	v, _, err := tf.Version(ctx, false)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTerraformNotFound, r.TerraformPath, err)
	}
	want, binary := run.TerraformVersion, "terraform"
	if r.OpenTofu {
		want, binary = run.OpenTofuVersion, "OpenTofu"
	}
	if v.String() != want {
		return fmt.Errorf("%w: %s is %s %s, not %s", ErrTerraformNotFound, r.TerraformPath, binary, v, want)
	}
	identity := r.binaryIdentity()
	checkedBinaries.Store(identity, true)
	record := filepath.Join(r.WorkDir, versionRecord)
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return err
	}
	return os.WriteFile(record, []byte(identity), 0o600)
}

// versionRecord is where a working directory records the binary whose version a run
// checked: the next run of the same binary there need not start it to ask.
const versionRecord = ".terraform/terraseed-version-checked"

// versionChecked says whether a run checked the version of this very binary (path, size,
// modification time, and the version wanted) in this process or in the working directory
// before.
func (r *Runner) versionChecked() bool {
	identity := r.binaryIdentity()
	if identity == "" {
		return false
	}
	if _, ok := checkedBinaries.Load(identity); ok {
		return true
	}
	recorded, err := os.ReadFile(filepath.Join(r.WorkDir, versionRecord))
	return err == nil && string(recorded) == identity
}

// checkedBinaries are the identities of the binaries whose version a run of this process
// checked: the runs of the local executor share the controller's process, and a create
// in a new working directory need not ask a binary again that an earlier run asked.
var checkedBinaries sync.Map

// binaryIdentity names the binary at TerraformPath as it is now; empty when it cannot be read.
func (r *Runner) binaryIdentity() string {
	info, err := os.Stat(r.TerraformPath)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s\x00%d\x00%d\x00%t\x00%s/%s", r.TerraformPath, info.Size(), info.ModTime().UnixNano(), r.OpenTofu, run.TerraformVersion, run.OpenTofuVersion)
}

// RunLockFile, in the working directory, is locked by the run that works in it.
const RunLockFile = ".terraseed-run.lock"

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// initRecord is where a working directory records what it was initialised for. It lives in
// terraform's data directory, so that it goes with what it describes.
const initRecord = ".terraform/terraseed-initialised"

// init runs terraform init unless the working directory was initialised for the same
// configuration files, lock file, CLI configuration and binary by an earlier run that
// succeeded: init would then change nothing, and costs a terraform process.
func (r *Runner) init(ctx context.Context, tf *tfexec.Terraform) error {
	record := filepath.Join(r.WorkDir, initRecord)
	digest, err := r.initDigest()
	if err != nil {
		return err
	}
	if recorded, err := os.ReadFile(record); err == nil && string(recorded) == digest {
		logf.FromContext(ctx).V(1).Info("initialisedAlready")
		return nil
	}
	forgetInit(r.WorkDir)
	err = r.timed("init", func() error {
		unlock, err := plugins(r.Plugins).lockCache(ctx)
		if err != nil {
			return err
		}
		defer unlock()
		return tf.Init(ctx, tfexec.Upgrade(false))
	})
	if err != nil {
		return err
	}
	// init wrote the lock file the digest covers.
	if digest, err = r.initDigest(); err != nil {
		return err
	}
	// A configuration without providers or modules leaves no data directory behind.
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return err
	}
	return os.WriteFile(record, []byte(digest), 0o600)
}

// forgetInit has the next run of dir initialise it.
func forgetInit(dir string) { _ = os.Remove(filepath.Join(dir, initRecord)) }

// initDigest covers what terraform init reads: the binary, the CLI configuration (the
// plugin mirror and cache), the configuration files (providers, modules, backend) and the
// dependency lock file; not the variables, which init does not read.
func (r *Runner) initDigest() (string, error) {
	files, err := filepath.Glob(filepath.Join(r.WorkDir, "*.tf"))
	if err != nil {
		return "", err
	}
	jsonFiles, err := filepath.Glob(filepath.Join(r.WorkDir, "*.tf.json"))
	if err != nil {
		return "", err
	}
	files = append(files, jsonFiles...)
	slices.Sort(files)
	files = append(files, filepath.Join(r.WorkDir, ".terraform.lock.hcl"), r.cliConfig)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", r.binaryIdentity())
	for _, path := range files {
		content, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(path), len(content))
		h.Write(content)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (r *Runner) execute(ctx context.Context, tf *tfexec.Terraform, result *run.Result) error {
	switch r.Command {
	case run.Apply:
		return r.apply(ctx)
	case run.Destroy:
		return r.timed(string(run.Destroy), func() error {
			w := r.tracker.writer(planOutput)
			_, err := r.runJSON(ctx, w, destroyArgs(r.Parallelism))
			_ = w.Close()
			return err
		})
	case run.Plan:
		return r.timed(string(run.Plan), func() error {
			changes, err := r.plan(ctx, "", false)
			if err == nil {
				r.tracker.publishPlan(false)
			}
			result.Changes = changes
			return err
		})
	case run.Validate:
		return r.timed(string(run.Validate), func() error { return r.validate(ctx, tf) })
	}
	return run.InvalidInput("command", string(r.Command))
}

func (r *Runner) validate(ctx context.Context, tf *tfexec.Terraform) error {
	out, err := tf.Validate(ctx)
	if err != nil {
		return err
	}
	var blocks []string
	for _, d := range out.Diagnostics {
		if d.Severity == "error" {
			blocks = append(blocks, run.DiagnosticBlock(d.Summary, d.Detail))
		}
	}
	if len(blocks) > 0 {
		return run.ErrorOfBlocks(string(run.Validate), blocks, run.ErrTerraformFailed)
	}
	return nil
}

// planFile is where an apply keeps its plan; writeFiles removes it before the next run.
const planFile = "terraseed.tfplan"

// guarded says whether an apply must check its plan before applying it: when its state
// holds or its configuration imports resources that it could destroy and some of them may
// be of a protected type. Over a state holding no resource, importing none, nothing can
// be destroyed, and without protected types (or with leave to destroy them) there is
// nothing to refuse.
func (r *Runner) guarded() bool {
	return (r.priorResources || r.imports) && len(r.ProtectedTypes) > 0 && !r.AllowDestroy
}

// apply applies the configuration. A guarded one plans, publishes the plan, refuses one
// that destroys a protected resource, and applies exactly the plan it checked, or nothing
// when the plan changes nothing; any other is one terraform apply, whose plan is read
// from what it shows before applying.
func (r *Runner) apply(ctx context.Context) error {
	if !r.guarded() {
		err := r.timed(string(run.Apply), func() error {
			w := r.tracker.writer(planningApplyOutput)
			_, err := r.runJSON(ctx, w, applyArgs(r.Parallelism, ""))
			_ = w.Close()
			return err
		})
		if hits := r.tracker.Plan().Destroys(r.ProtectedTypes); len(hits) > 0 {
			logf.FromContext(ctx).Info("destroyedProtectedResources", "changes", len(hits))
		}
		return err
	}
	var changes bool
	err := r.timed(string(run.Plan), func() error {
		var err error
		changes, err = r.plan(ctx, planFile, true)
		return err
	})
	if err != nil {
		return err
	}
	if plan := r.tracker.Plan(); len(plan.Destroys(r.ProtectedTypes)) > 0 {
		if r.AllowDestroyPlan == "" || r.AllowDestroyPlan != plan.Digest {
			r.tracker.publishPlan(false)
			return run.ProtectedError(plan, r.AllowDestroyPlan, r.ProtectedTypes)
		}
		logf.FromContext(ctx).Info("applyingAllowedPlan", "plan", r.AllowDestroyPlan)
	}
	r.tracker.publishPlan(changes)
	if !changes {
		// Nothing to apply, and so no state to write.
		logf.FromContext(ctx).V(1).Info("nothingToApply")
		return nil
	}
	return r.timed(string(run.Apply), func() error {
		w := r.tracker.writer(appliedPlanOutput)
		_, err := r.runJSON(ctx, w, applyArgs(r.Parallelism, planFile))
		_ = w.Close()
		return err
	})
}

// plan runs `terraform plan`, saving the plan to out when set, and says whether it found
// changes.
func (r *Runner) plan(ctx context.Context, out string, lock bool) (bool, error) {
	w := r.tracker.writer(planOutput)
	code, err := r.runJSON(ctx, w, planArgs(r.Parallelism, out, lock))
	_ = w.Close()
	if code == exitChanges {
		return true, nil
	}
	return false, err
}

// finalSave writes the state once more after terraform exited, retrying until the
// deadline; if that fails the state goes to StateFallback so that it is not lost.
func (r *Runner) finalSave(ctx context.Context) error {
	saved, err := os.ReadFile(r.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: reading the state file: %w", run.ErrStateNotSaved, err)
	}
	timeout := r.FinalSaveTimeout
	if timeout == 0 {
		timeout = DefaultFinalSaveTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 10 * time.Second}
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		_, lastErr = r.store.Save(ctx, saved)
		// A newer stored state stays newer: the run fails naming it, its state kept in
		// StateFallback.
		if errors.Is(lastErr, state.ErrInvalidState) || errors.Is(lastErr, state.ErrLineageMismatch) || errors.Is(lastErr, state.ErrStaleState) {
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
	if r.StateFallback != nil {
		fmt.Fprintf(r.StateFallback, "%s\n%s\n%s\n", StateFallbackBegin, saved, StateFallbackEnd)
	}
	return fmt.Errorf("%w: %w", run.ErrStateNotSaved, lastErr)
}

// The state printed when it cannot be saved is framed by these lines.
const (
	StateFallbackBegin = "----- BEGIN TERRAFORM STATE -----"
	StateFallbackEnd   = "----- END TERRAFORM STATE -----"
)
