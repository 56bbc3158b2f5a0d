//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// takeTerminal puts this process into a process group of its own and makes that group the
// terminal's foreground, when stdin is a terminal. Ctrl-C then interrupts terraseed alone:
// the make (or shell script) that started it sees its command end on its own, with the
// exit status terraseed chooses, rather than an interrupt of its own that it reports as a
// failure. The returned function gives the terminal back to the group that had it.
func takeTerminal() (giveBack func()) {
	fd := int(os.Stdin.Fd())
	previous, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || previous != syscall.Getpgrp() {
		return func() {} // no terminal, or started in the background: nothing to take
	}
	// A process group not in the foreground that changes the foreground is stopped by
	// SIGTTOU unless it ignores it.
	signal.Ignore(syscall.SIGTTOU)
	if err := syscall.Setpgid(0, 0); err != nil {
		return func() {}
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, syscall.Getpgrp()); err != nil {
		_ = syscall.Setpgid(0, previous)
		return func() {}
	}
	return func() { _ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, previous) }
}
