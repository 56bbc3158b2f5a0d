// Command pause is the pod sandbox ("pause") container of the test node: it blocks until
// SIGTERM or SIGINT and reaps the orphans it inherits as PID 1 of a pod that shares its
// process namespace. It is built here and imported into containerd under the name
// containerd's sandbox_image setting names, because no registry can be reached.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
