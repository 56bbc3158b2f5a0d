package terraformer

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// eraseFromEnviron overwrites the variables names in the environment block the process
// was started with, which is what /proc/<pid>/environ shows: os.Unsetenv changes only the
// Go runtime's copy. The block lies in the process's own memory, between the addresses
// /proc/<pid>/stat gives as env_start and env_end, and is written through /proc/<pid>/mem.
// The Go runtime's strings of the variables point into it: the caller copies the values
// first, and unsets them, so that nothing reads them there again. The process is then made
// non-dumpable, so that a process of the same user (terraform's provider plugins) can
// read neither its environment nor its memory, where the values still are.
func eraseFromEnviron(names ...string) error {
	start, end, err := environBounds()
	if err != nil {
		return err
	}
	// By number: container runtimes' AppArmor profile (docker-default) denies writes
	// under /proc/self, not under /proc/<pid>.
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", os.Getpid()), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return fmt.Errorf("reading the environment block: %w", err)
	}
	offset := 0
	for _, entry := range bytes.Split(block, []byte{0}) {
		name, _, _ := bytes.Cut(entry, []byte("="))
		for _, n := range names {
			if string(name) == n {
				if _, err := mem.WriteAt(make([]byte, len(entry)), int64(start)+int64(offset)); err != nil {
					return fmt.Errorf("overwriting %s in the environment block: %w", n, err)
				}
			}
		}
		offset += len(entry) + 1
	}
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// environBounds are env_start and env_end of the process's /proc/<pid>/stat (fields 50 and 51, since
// Linux 3.5), counted after the command name, which may hold spaces and parentheses.
func environBounds() (uint64, uint64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", os.Getpid()))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/<pid>/stat: no command name")
	}
	// The fields after the command name start with the third, the state.
	fields := strings.Fields(string(stat[i+1:]))
	const envStart, envEnd = 50 - 3, 51 - 3
	if len(fields) <= envEnd {
		return 0, 0, fmt.Errorf("/proc/<pid>/stat: %d fields, no env_start and env_end", len(fields)+2)
	}
	start, err := strconv.ParseUint(fields[envStart], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/<pid>/stat: env_start: %w", err)
	}
	end, err := strconv.ParseUint(fields[envEnd], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/<pid>/stat: env_end: %w", err)
	}
	if end < start {
		return 0, 0, fmt.Errorf("/proc/<pid>/stat: env_end %d before env_start %d", end, start)
	}
	return start, end, nil
}
