package tftest

import "github.com/prometheus/procfs"

// Descendants returns pid and every process below it: a terraformer, terraform and its
// provider plugins.
func Descendants(pid int) []int {
	all := []int{pid}
	for _, kid := range Children(pid) {
		all = append(all, Descendants(kid)...)
	}
	return all
}

// Children returns the processes whose parent is pid.
func Children(pid int) []int {
	return processes(func(s procfs.ProcStat) bool { return s.PPID == pid })
}

// Group returns the processes of the process group pgid.
func Group(pgid int) []int {
	return processes(func(s procfs.ProcStat) bool { return s.PGRP == pgid })
}

// Command returns the name of the command pid runs, "" when it is gone.
func Command(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	comm, _ := p.Comm()
	return comm
}

// processes returns the processes whose stat matches; those that end meanwhile are left out.
func processes(match func(procfs.ProcStat) bool) []int {
	procs, _ := procfs.AllProcs()
	var pids []int
	for _, p := range procs {
		if s, err := p.Stat(); err == nil && match(s) {
			pids = append(pids, p.PID)
		}
	}
	return pids
}
