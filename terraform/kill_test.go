package terraform

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// startTerraformer starts the terraformer process the local executor would run, without
// waiting for it.
func (f *fixture) startTerraformer(command Command) (*exec.Cmd, string) {
	f.t.Helper()
	cmd, termination, err := f.executor.command(context.Background(), f.request(command))
	NewWithT(f.t).Expect(err).NotTo(HaveOccurred())
	cmd.Stdout, cmd.Stderr = f.output, f.output
	NewWithT(f.t).Expect(cmd.Start()).To(Succeed())
	return cmd, termination
}

// waitForItems waits until at least n of the test's ConfigMaps exist.
func (f *fixture) waitForItems(n int) {
	f.t.Helper()
	NewWithT(f.t).Eventually(func(g Gomega) {
		g.Expect(len(f.items(g))).To(BeNumerically(">=", n))
	}).WithTimeout(2 * time.Minute).WithPolling(10 * time.Millisecond).Should(Succeed())
}

// descendants returns pid and every process below it: the terraformer, terraform and
// its provider plugins.
func descendants(pid int) []int {
	all := []int{pid}
	for _, kid := range children(pid) {
		all = append(all, descendants(kid)...)
	}
	return all
}

// children returns the processes whose parent is pid.
func children(pid int) []int {
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

func TestKilledApplyLeavesEveryResourceExactlyOnce(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 20)
	// One operation at a time spreads the apply out, so the kills land mid-apply.
	f.executor.Parallelism = 1

	for _, killAt := range []int{1, 7, 14} {
		cmd, _ := f.startTerraformer(Apply)
		f.waitForItems(killAt)
		victims := descendants(cmd.Process.Pid)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		err := cmd.Wait()
		var exitErr *exec.ExitError
		g.Expect(errors.As(err, &exitErr)).To(BeTrue(), "the terraformer was killed")
		created := f.items(g)
		stored, _ := f.stateItems(g)
		t.Logf("killed at %d objects (terraformer and %d children): %d created, %d in the stored state", killAt, len(victims)-1, len(created), len(stored))
		g.Expect(len(created)).To(BeNumerically("<", 20), "the kill landed before the apply finished")
	}

	_, err := f.run(Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.expectEachItemOnceInState(g, 20)
}

func TestSigtermStopsTerraformCleanlyAndSavesTheState(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 20)
	f.executor.Parallelism = 1

	cmd, termination := f.startTerraformer(Apply)
	f.waitForItems(5)
	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(cmd.Wait()).To(HaveOccurred())
	g.Expect(cmd.ProcessState.ExitCode()).To(Equal(1), "the terraformer exited by itself, not by the signal")
	g.Expect(children(cmd.Process.Pid)).To(BeEmpty())

	runErr := runFailure(Apply, termination, "", nil)
	g.Expect(runErr.Error()).To(ContainSubstring("interrupted"))
	g.Expect(runErr.(*RunError).Retryable).To(BeTrue())
	// terraform finished what it had started and the state records it; a create the
	// provider itself abandoned on the interrupt may be missing, at most the one in flight.
	created := f.items(g)
	g.Expect(len(created)).To(BeNumerically("<", 20))
	stateNames, _ := f.stateItems(g)
	g.Expect(created).To(ContainElements(stateNames))
	g.Expect(len(created) - len(stateNames)).To(BeNumerically("<=", 1))
	g.Expect(f.output.String()).To(ContainSubstring("Interrupt received"))

	_, err := f.run(Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.expectEachItemOnceInState(g, 20)
}
