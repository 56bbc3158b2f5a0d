package executor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// LocalExecutor runs the terraformer as a child process on this machine, in a working
// directory private to each run ID that outlives the run, so that a state a killed run
// could not save is recovered by the next.
type LocalExecutor struct {
	// Client reads the saved state; Config is what the terraformer connects with.
	Client client.Client
	Config *rest.Config
	// Terraformer is the command line that starts the terraformer, e.g. {"/usr/bin/terraformer"}.
	Terraformer []string
	// TerraformPath is the terraform binary of the pinned version.
	TerraformPath string
	// OpenTofu says that TerraformPath is OpenTofu of the pinned version instead.
	OpenTofu bool
	Plugins  terraformer.Plugins
	// BaseDir holds one directory per run ID.
	BaseDir     string
	Parallelism int
	// Output receives terraform's output and the terraformer's log; discarded when nil.
	Output io.Writer
	// StopTimeout is how long a cancelled run may take to stop before it is killed.
	StopTimeout time.Duration
	// ProgressInterval is how often the run writes its progress and it is read;
	// terraformer.DefaultProgressInterval when zero.
	ProgressInterval time.Duration

	guard runGuard
}

var _ Executor = (*LocalExecutor)(nil)

// Run starts the terraformer and waits for it. Cancelling ctx sends it SIGTERM, which
// it relays to terraform, and waits for it to save the state.
func (e *LocalExecutor) Run(ctx context.Context, req Request) (*terraformer.Result, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if len(e.Terraformer) == 0 {
		return nil, run.InvalidInput("terraformer", "must name the terraformer command")
	}
	release, err := e.guard.acquire(req)
	if err != nil {
		return nil, err
	}
	defer release()

	cmd, termination, err := e.command(ctx, req)
	if err != nil {
		return nil, err
	}
	report := fileReport(reportFileOf(cmd.Dir))
	output := &tailBuffer{limit: 64 << 10}
	cmd.Stdout = io.MultiWriter(cmp.Or[io.Writer](e.Output, io.Discard), output)
	cmd.Stderr = cmd.Stdout
	logf.FromContext(ctx).V(1).Info("terraformerStarting", "command", req.Command, "workDir", cmd.Dir)
	stopProgress := followProgress(ctx, report, req, e.ProgressInterval)
	runErr := cmd.Start()
	if runErr == nil {
		if req.Background {
			lowerPriority(ctx, cmd.Process.Pid)
		}
		runErr = cmd.Wait()
	}
	stopProgress()
	if runErr != nil {
		return nil, runFailure(req.Command, termination, output.String(), runErr)
	}
	// The state file the run left is the state it saved, read without a request.
	result, err := resultFromStateFile(filepath.Join(workDirOf(cmd.Dir), state.StateKey), req.Command)
	if err != nil {
		return nil, err
	}
	if data, err := os.ReadFile(termination); err == nil {
		result.Phases, _, _ = terraformer.ParseTerminationMessage(string(data))
	}
	return withPlan(ctx, report, req, result)
}

var _ ActivityChecker = (*LocalExecutor)(nil)

// Active is true while a terraformer process holds the working directory of a run of
// id (the terraformer's run lock), also one an earlier controller process started.
func (e *LocalExecutor) Active(_ context.Context, id run.ID) (bool, error) {
	path := filepath.Join(workDirOf(filepath.Join(e.BaseDir, id.Dir())), terraformer.RunLockFile)
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

// command prepares the terraformer's process and returns it with the path of its termination message.
func (e *LocalExecutor) command(ctx context.Context, req Request) (*exec.Cmd, string, error) {
	dir := filepath.Join(e.BaseDir, req.ID.Dir())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("creating the run directory: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(e.Config, kubeconfig); err != nil {
		return nil, "", err
	}
	// What an earlier run left is not this run's.
	termination := filepath.Join(dir, "termination-message")
	for _, path := range []string{termination, reportFileOf(dir)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, "", err
		}
	}
	args := append(e.Terraformer[1:len(e.Terraformer):len(e.Terraformer)], string(req.Command),
		"--namespace", req.ID.Namespace, "--name", req.ID.Name, "--purpose", string(req.ID.Purpose),
		"--kubeconfig", kubeconfig,
		"--work-dir", workDirOf(dir),
		"--terraform", e.TerraformPath,
		"--plugin-mirror", e.Plugins.Mirror,
		"--plugin-cache-dir", e.Plugins.CacheDir,
		"--allow-provider-download="+strconv.FormatBool(e.Plugins.AllowDownload),
		"--parallelism", strconv.Itoa(e.Parallelism),
		"--termination-message-path", termination,
		"--report-file", reportFileOf(dir),
	)
	args = append(args, runArgs(req, e.OpenTofu, e.ProgressInterval)...)
	cmd := exec.CommandContext(ctx, e.Terraformer[0], args...)
	cmd.Env = runEnv(req.Env)
	cmd.Dir = dir
	// If this process dies, the terraformer is told to stop, and saves the state.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = e.StopTimeout
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = terraformer.DefaultStopTimeout
	}
	return cmd, termination, nil
}

// BackgroundNice is the nice value of a background run's processes.
const BackgroundNice = 10

// lowerPriority gives the process group of a terraformer just started the nice value
// BackgroundNice. The terraformer leads its own group: setting the group's priority
// covers whatever it started already, and terraform and the providers it starts later
// inherit it. A run that keeps its priority is still a correct run, so a failure is
// only logged.
func lowerPriority(ctx context.Context, pgid int) {
	if err := syscall.Setpriority(syscall.PRIO_PGRP, pgid, BackgroundNice); err != nil {
		logf.FromContext(ctx).Error(err, "backgroundPriorityNotSet")
	}
}

// reportFileOf is where a run reports its progress and plan within a run directory.
func reportFileOf(runDir string) string { return filepath.Join(runDir, "report.json") }

// workDirOf is terraform's working directory within a run directory.
func workDirOf(runDir string) string { return filepath.Join(runDir, "work") }

// runFailure rebuilds a run's error from its termination message, or from its output
// when it died before writing one.
func runFailure(command terraformer.Command, terminationPath, output string, cause error) error {
	if data, err := os.ReadFile(terminationPath); err == nil {
		if _, re, ok := terraformer.ParseTerminationMessage(string(data)); ok {
			return re
		}
	}
	return terraformer.NewRunError(string(command), output, cause)
}

// resultFromStateFile reads a finished run's outputs from the state file it left.
func resultFromStateFile(path string, command terraformer.Command) (*terraformer.Result, error) {
	return resultOf(command, func() ([]byte, error) {
		state, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("reading the state file: %w", err)
		}
		return state, nil
	})
}

// resultFromState reads a finished run's outputs from the stored state.
func resultFromState(ctx context.Context, store *state.StateStore, command terraformer.Command) (*terraformer.Result, error) {
	return resultOf(command, func() ([]byte, error) { return store.Load(ctx) })
}

func resultOf(command terraformer.Command, saved func() ([]byte, error)) (*terraformer.Result, error) {
	if command == terraformer.Validate {
		return &terraformer.Result{Outputs: map[string]any{}}, nil
	}
	data, err := saved()
	if err != nil {
		return nil, err
	}
	outputs, err := state.Outputs(data)
	if err != nil {
		return nil, err
	}
	return &terraformer.Result{Outputs: outputs, State: data}, nil
}

// runEnv is the terraformer's environment: what a process needs to run, and the
// request's credentials; never the controller's own environment.
func runEnv(credentials map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range credentials {
		env = append(env, k+"="+v)
	}
	return env
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	if cfg == nil {
		return run.InvalidInput("config", "must be set")
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientCertificate: cfg.CertFile,
		ClientKeyData: cfg.KeyData, ClientKey: cfg.KeyFile,
		Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
		Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts["run"] = &clientcmdapi.Context{Cluster: "api", AuthInfo: "user"}
	kc.CurrentContext = "run"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing the run's kubeconfig: %w", err)
	}
	return os.Chmod(path, 0o600)
}

// tailBuffer keeps the last limit bytes written to it: enough for terraform's errors.
type tailBuffer struct {
	limit int
	buf   bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf.Write(p)
	if over := b.buf.Len() - b.limit; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return b.buf.String() }

// runArgs are the terraformer's flags both executors derive from a request.
func runArgs(req Request, openTofu bool, progressInterval time.Duration) []string {
	var args []string
	if openTofu {
		args = append(args, "--opentofu")
	}
	if len(req.ProtectedTypes) > 0 {
		args = append(args, "--protected-resource-types", strings.Join(req.ProtectedTypes, ","))
	}
	if req.AllowDestroy {
		args = append(args, "--allow-destroy")
	}
	if progressInterval > 0 {
		args = append(args, "--progress-interval", progressInterval.String())
	}
	return args
}
