package terraformer

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// The commands a run follows through their JSON output are started here, not through
// terraform-exec: its JSON commands first run `terraform version` in each process that
// uses them, and a run is one process. That is a second terraform process per run, which
// costs about a tenth of a reconcile with nothing to change; the run checks the binary's
// version itself, once per working directory and binary (see versionChecked). Init and
// validate, which need no JSON stream, still go through terraform-exec.

// parallelismArg is terraform's own default when parallelism is not set.
func parallelismArg(parallelism int) string {
	if parallelism <= 0 {
		parallelism = 10
	}
	return "-parallelism=" + strconv.Itoa(parallelism)
}

// runTerraform runs terraform with args in the working directory, its output (JSON, for
// all but init) to stdout and its errors to the run's stderr, and returns its exit code.
// Cancelling ctx interrupts terraform, which then stops cleanly, and kills it after the
// stop timeout.
func (r *Runner) runTerraform(ctx context.Context, stdout io.Writer, args []string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, r.Settings.Terraform, args...)
	cmd.Dir = r.WorkDir
	cmd.Env = append(r.terraformEnv(), "TF_CLI_CONFIG_FILE="+r.cliConfig)
	cmd.Stdout, cmd.Stderr = stdout, r.stderr
	// terraform leads its own group, so that a signal to the group of the process that
	// started it is relayed by that process alone; it dies with that process, whose run
	// lock goes with it. What it did is in the state file of the working directory, which
	// the next run recovers, or in the state it saved as it went.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = r.Settings.stopTimeout()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if r.Nice != 0 {
		// The group's priority covers whatever terraform started already; the providers it
		// starts later inherit it. A run that keeps its priority is still a correct run.
		if err := syscall.Setpriority(syscall.PRIO_PGRP, cmd.Process.Pid, r.Nice); err != nil {
			logf.FromContext(ctx).Error(err, "priorityNotSet", "nice", r.Nice)
		}
	}
	err := cmd.Wait()
	if killed(cmd.ProcessState) {
		// Killed, at the end of its stop timeout or by anyone else, terraform could not stop
		// what it started: its provider plugins and provisioners, which share its group,
		// would run on beside the controller. While one of them lives, the group's id is
		// not given to another process.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), err
	}
	return 0, err
}

// killed says whether the process ended by SIGKILL.
func killed(state *os.ProcessState) bool {
	if state == nil {
		return false
	}
	status, ok := state.Sys().(syscall.WaitStatus)
	return ok && status.Signaled() && status.Signal() == syscall.SIGKILL
}

// terraformEnv is the run's environment for terraform, as terraform-exec builds it: in
// automation, no log of terraform's own mixed into its output, and no workspace other
// than the default.
func (r *Runner) terraformEnv() []string {
	environ := r.Env
	if environ == nil {
		environ = os.Environ()
	}
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "TF_LOG", "TF_LOG_CORE", "TF_LOG_PROVIDER", "TF_LOG_PATH", "TF_WORKSPACE", "TF_IN_AUTOMATION", "TF_CLI_CONFIG_FILE":
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, r.traceEnv...), "TF_IN_AUTOMATION=1")
}
