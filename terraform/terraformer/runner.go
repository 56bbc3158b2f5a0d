package terraformer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/purge"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/terraform/state"
)

// DefaultFinalSaveTimeout bounds the retries of the last state save after terraform exits.
const DefaultFinalSaveTimeout = 2 * time.Minute

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
	// Settings are the executor's, with the request's parallelism; Settings.Terraform must
	// name the binary.
	Settings Settings
	// Stdout and Stderr receive terraform's output.
	Stdout, Stderr io.Writer
	// FinalSaveTimeout bounds the last save; DefaultFinalSaveTimeout when zero.
	FinalSaveTimeout time.Duration
	// ProtectedTypes are resource types an apply must not destroy or replace unless
	// AllowDestroy is set; the run then fails with ErrDestroyProtected before changing anything.
	ProtectedTypes []string
	AllowDestroy   bool
	// AllowDestroyPlan, when set, lets exactly the plan of this digest destroy or replace
	// protected resources: the apply then applies the very plan it checked.
	AllowDestroyPlan string
	// ReportFile, when set, receives the progress and the plan instead of the annotations
	// of the configuration ConfigMap: for a run on the machine of the executor that reads it.
	ReportFile string
	// Env is the environment terraform runs in (the credentials among it); this process's
	// own when nil.
	Env []string
	// Nice, when not zero, is the nice value of the run's terraform processes, which their
	// providers inherit: a run others need not wait for yields the CPU to those they do.
	Nice int

	store  *state.Store
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
	// purge is what the configuration says a destroy purges first; nil: nothing.
	purge *purge.Spec
	// stderr receives terraform's errors: the run's Stderr and a copy a failure reads.
	stderr io.Writer
	// traceEnv is what makes OpenTofu's spans join the run's trace; nil for terraform or
	// while tracing is off.
	traceEnv []string
}

// Phases is how long each terraform command of the last Run took.
func (r *Runner) Phases() run.Phases { return r.phases }

// TerraformStarted is when the last Run started its first terraform command; zero when
// it started none.
func (r *Runner) TerraformStarted() time.Time { return r.terraformStarted }

// timed runs one terraform command as the phase of that name, in a span of that name.
func (r *Runner) timed(ctx context.Context, phase string, command func() error) error {
	_, span := tracing.Start(ctx, commandSpan(phase))
	defer span.End()
	started := time.Now()
	if r.terraformStarted.IsZero() {
		r.terraformStarted = started
	}
	err := command()
	r.phases[phase] = time.Since(started)
	tracing.Fail(span, err)
	return err
}

// commandSpan is the name of the span of a terraform command: a constant, which costs
// nothing while tracing is off.
func commandSpan(phase string) string {
	switch phase {
	case "init":
		return "terraform.init"
	case string(run.Plan):
		return "terraform.plan"
	case string(run.Apply):
		return "terraform.apply"
	case string(run.Destroy):
		return "terraform.destroy"
	case string(run.Validate):
		return "terraform.validate"
	}
	return "terraform"
}

// Run executes the command. Cancelling ctx interrupts terraform, which then stops
// cleanly; the state is saved in any case.
func (r *Runner) Run(ctx context.Context) (_ *run.Result, err error) {
	if err := r.checkInput(); err != nil {
		return nil, err
	}
	ctx, span := tracing.Start(ctx, "terraformer", attribute.String("terraseed.command", string(r.Command)))
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	// OpenTofu traces itself into the run's trace when told where to (its OTLP tracing).
	r.traceEnv = nil
	if r.Settings.OpenTofu {
		if env := tracing.Env(ctx); env != nil {
			r.traceEnv = append(env, "OTEL_TRACES_EXPORTER=otlp")
		}
	}
	r.phases, r.terraformStarted = run.Phases{}, time.Time{}
	id := r.Objects.ID
	log := logf.FromContext(ctx).WithValues("command", r.Command, "infrastructure", id.Namespace+"/"+id.Name, "purpose", id.Purpose)
	ctx = logf.IntoContext(ctx, log)
	// API calls that must finish even after an interrupt use this context.
	persistCtx := context.WithoutCancel(ctx)
	r.store = r.Objects.Store(r.Client)

	unlock, err := r.lockWorkDir()
	if err != nil {
		return nil, err
	}
	defer unlock()
	stderr, err := r.prepare(ctx)
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
		r.tracker = newTracker(persistCtx, r.Command, orDiscard(r.Stdout), r.Settings.ProgressInterval, r.report())
		r.tracker.setConfiguration(r.configuration)
	}
	result := &run.Result{}
	runErr := r.execute(ctx, result)
	log.V(1).Info("terraformExited")
	if runErr != nil {
		// The next run initialises again, in case the working directory was the cause.
		forgetInit(r.WorkDir)
	}
	if err := r.save(persistCtx, watcher, result); err != nil {
		return nil, errors.Join(err, runErr)
	}
	log.V(1).Info("stateSaved")
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
	if r.Settings.Terraform == "" {
		return run.InvalidInput("terraformPath", "must not be empty")
	}
	return nil
}

// prepare makes the working directory ready for the command: the binary checked, the
// configuration and the state in place, terraform initialised.
func (r *Runner) prepare(ctx context.Context) (*bytes.Buffer, error) {
	stderr, err := r.setUp()
	if err != nil {
		return nil, err
	}
	// The `terraform version` that checks the binary runs while the run's objects are read,
	// unless its build information tells its version, or a run checked this binary in this
	// process or working directory before.
	versionChecked := make(chan error, 1)
	if known, err := checkBuiltVersion(r.Settings.Terraform, r.Settings.OpenTofu); known {
		versionChecked <- wrapNotFound(err)
	} else if r.versionChecked() {
		versionChecked <- nil
	} else {
		go func() { versionChecked <- r.checkVersion(ctx) }()
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
		return nil, err
	}
	log := logf.FromContext(ctx)
	log.V(1).Info("inputsRead")
	if err := checkedVersion(); err != nil {
		return nil, err
	}
	log.V(1).Info("versionChecked")
	if err := r.init(ctx); err != nil {
		return nil, run.NewError("init", stderr.String(), err)
	}
	return stderr, nil
}

// report is where the run's progress and plan go, where the executor reads them: the
// report file beside the controller, else the annotations of the configuration ConfigMap.
func (r *Runner) report() report.Transport {
	if r.ReportFile != "" {
		return report.File(r.ReportFile)
	}
	return report.Annotations{Client: r.Client, ID: r.Objects.ID}
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

func (r *Runner) execute(ctx context.Context, result *run.Result) error {
	switch r.Command {
	case run.Apply:
		return r.apply(ctx)
	case run.Destroy:
		// What terraform has no resource for goes first: a purge that fails fails the
		// destroy, and the deletion's next run purges again.
		if err := r.runPurge(ctx); err != nil {
			return err
		}
		return r.timed(ctx, string(run.Destroy), func() error { return r.destroy(ctx) })
	case run.Plan:
		return r.timed(ctx, string(run.Plan), func() error {
			changes, err := r.plan(ctx, "", false)
			if err == nil {
				r.tracker.publishPlan(false)
			}
			result.Changes = changes
			return err
		})
	case run.Validate:
		return r.timed(ctx, string(run.Validate), func() error { return r.validate(ctx) })
	}
	return run.InvalidInput("command", string(r.Command))
}

// setUp writes the run's CLI configuration and collects terraform's errors, which the
// run's error quotes, besides passing them on to Stderr.
func (r *Runner) setUp() (*bytes.Buffer, error) {
	stderr := &bytes.Buffer{}
	r.stderr = io.MultiWriter(orDiscard(r.Stderr), stderr)
	cliConfig, err := plugins(r.Settings.Plugins).writeCLIConfig(r.WorkDir)
	if err != nil {
		return nil, err
	}
	r.cliConfig = cliConfig
	return stderr, nil
}

// setEnv makes environ, with name set to value, the environment of the commands tf
// runs, less what terraform-exec sets itself.
func setEnv(tf *tfexec.Terraform, environ []string, name, value string) error {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	env[name] = value
	return tf.SetEnv(tfexec.CleanEnv(env))
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
