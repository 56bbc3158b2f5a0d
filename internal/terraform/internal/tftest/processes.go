package tftest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

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
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses and may hold spaces.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			kid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			kids = append(kids, kid)
		}
	}
	return kids
}

// Group returns the processes of the process group pgid.
func Group(pgid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var members []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// After the command name: state, parent, process group.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) > 2 && fields[2] == strconv.Itoa(pgid) {
			member, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			members = append(members, member)
		}
	}
	return members
}

// Command returns the name of the command pid runs, "" when it is gone.
func Command(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
