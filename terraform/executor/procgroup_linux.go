package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
)

// A local run's terraform leads a process group of its own, which its provider plugins
// and provisioners join, and dies with the controller process that started it (see
// terraformer.Runner). Killed with the controller (SIGKILL, the OOM killer), terraform
// cannot stop what it started, and nothing of the controller is left to end it: the
// plugins and provisioners run on, their group's leader gone, in the run's directory.
// endLeftoverGroups ends them before the executor's next run.

// endLeftoverGroups SIGKILLs every process group that works in baseDir (a process's
// working directory is the run's, which it inherited from terraform) and whose leader,
// terraform, has ended. A group whose terraform lives is a run under way, this process's
// or another's, and is left alone; the kernel gives no process the id of a group that
// still has members, so a leader's id names no other process. It returns the processes
// it found so.
func endLeftoverGroups(baseDir string) (int, error) {
	dir, err := filepath.EvalSymlinks(baseDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	own := syscall.Getpgrp()
	groups := map[int]bool{}
	found := 0
	for _, p := range procs {
		stat, err := p.Stat()
		if err != nil || stat.PGRP == own || stat.PGRP == p.PID || stat.PGRP <= 1 {
			continue
		}
		cwd, err := p.Cwd()
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
			continue
		}
		if groups[stat.PGRP] || groupLeaderGone(stat.PGRP) {
			groups[stat.PGRP] = true
			found++
		}
	}
	var errs []error
	for pgid := range groups {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("ending process group %d: %w", pgid, err))
		}
	}
	return found, errors.Join(errs...)
}

// groupLeaderGone says whether the leader of process group pgid has ended: it is no
// process any more, or one that ended and that no parent reaped yet (its new parent, once
// its own died, need not reap it).
func groupLeaderGone(pgid int) bool {
	leader, err := procfs.NewProc(pgid)
	if err != nil {
		return true
	}
	stat, err := leader.Stat()
	return err != nil || stat.State == "Z" || stat.State == "X"
}
