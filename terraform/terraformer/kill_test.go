package terraformer

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/termination"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// startTerraformer starts the terraformer process a run pod runs, on this machine,
// without waiting for it. It returns the process and the path of its termination message.
func (f *fixture) startTerraformer(command run.Command) (*exec.Cmd, string) {
	f.T.Helper()
	dir := filepath.Dir(f.workDir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	NewWithT(f.T).Expect(tftest.WriteKubeconfig(env.Config, kubeconfig)).To(Succeed())
	return f.startTerraformerWith(nil, command, []string{"--kubeconfig", kubeconfig}, nil)
}

// startTerraformerWith starts the terraformer as startTerraformer does, reaching the API
// server as args and the variables apiEnv (added to its environment) say, through the
// command prefix when one is given (which must exec the terraformer in its own process).
func (f *fixture) startTerraformerWith(prefix []string, command run.Command, args, apiEnv []string) (*exec.Cmd, string) {
	f.T.Helper()
	g := NewWithT(f.T)
	message := filepath.Join(filepath.Dir(f.workDir), "termination-message")
	args = append([]string{string(command),
		"--namespace", f.Objects.ID.Namespace, "--name", f.Objects.ID.Name, "--purpose", string(f.Objects.ID.Purpose),
	}, args...)
	args = append(args,
		"--work-dir", f.workDir,
		"--terraform", f.settings.Terraform,
		"--plugin-mirror", f.settings.Plugins.Mirror,
		"--termination-message-path", message,
		"--report-file", f.reportFile,
	)
	name := testenv.TerraformerBinary(f.T)
	if len(prefix) > 0 {
		args = append(append(slices.Clone(prefix[1:]), name), args...)
		name = prefix[0]
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(f.env(), apiEnv...)
	cmd.Stdout, cmd.Stderr = f.Output, f.Output
	g.Expect(cmd.Start()).To(Succeed())
	return cmd, message
}

// newWorkDir has the next run start in a fresh working directory, as a new run pod does.
func (f *fixture) newWorkDir() {
	f.workDir = filepath.Join(f.T.TempDir(), "work")
}

// runFailure reads the error of a terraformer process that failed from its termination message.
func runFailure(g Gomega, message string) *run.Error {
	data, err := os.ReadFile(message)
	g.Expect(err).NotTo(HaveOccurred())
	_, re, ok := termination.Parse(string(data))
	g.Expect(ok).To(BeTrue(), "a failed run's termination message: %s", data)
	return re
}

func TestKilledApplyLeavesEveryResourceExactlyOnce(t *testing.T) {
	g := NewWithT(t)
	const resources = 20
	f := newFixture(t, resources)
	// Early, in the middle and late in the apply.
	gates := []*tftest.Gate{f.NewGate(1), f.NewGate(9), f.NewGate(17)}
	f.WriteChainConfig(resources, gates...)

	// Each run starts where the killed one stopped, in a fresh working directory, as a
	// new run pod would, passes the gates opened before and stops at the next.
	for _, gate := range gates {
		f.newWorkDir()
		cmd, _ := f.startTerraformer(run.Apply)
		gate.WaitUntilReached()
		victims := tftest.Descendants(cmd.Process.Pid)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		err := cmd.Wait()
		var exitErr *exec.ExitError
		g.Expect(errors.As(err, &exitErr)).To(BeTrue(), "the terraformer was killed")
		created, listed := f.ExpectNoLostStateEntry(g)
		t.Logf("killed at the gate before pair %d (terraformer and %d children): %d created, %d in the stored state", gate.Index, len(victims)-1, created, listed)
		g.Expect(created).To(Equal(gate.Index+1), "nothing was created past the gate")
		gate.Open()
	}

	f.newWorkDir()
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.ExpectEachItemOnceInState(g, resources)
}

func TestSigtermStopsTerraformCleanlyAndSavesTheState(t *testing.T) {
	g := NewWithT(t)
	const resources = 20
	f := newFixture(t, resources)
	gate := f.NewGate(4)
	f.WriteChainConfig(resources, gate)

	cmd, termination := f.startTerraformer(run.Apply)
	gate.WaitUntilReached()
	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(cmd.Wait()).To(HaveOccurred())
	g.Expect(cmd.ProcessState.ExitCode()).To(Equal(1), "the terraformer exited by itself, not by the signal")
	g.Expect(tftest.Children(cmd.Process.Pid)).To(BeEmpty())
	g.Expect(f.Output.String()).To(ContainSubstring("Interrupt received"))

	runErr := runFailure(g, termination)
	g.Expect(runErr.Error()).To(ContainSubstring("interrupted"))
	re := tftest.ExpectRunError(g, runErr)
	g.Expect(re.Invalid).To(BeFalse())
	g.Expect(errorcodes.Retryable(tftest.CodesOf(re))).To(BeTrue(), "an interrupted run is retried")

	// The stored state is terraform's last word, the state file it left.
	local, err := os.ReadFile(filepath.Join(f.workDir, state.Key))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Objects.ReadState(context.Background(), env.Client)).To(Equal(local))

	// On an interrupt terraform starts nothing new and waits for what is in flight; the
	// state records every create a provider reported done. The kubectl provider, though,
	// gives up on the create in flight when terraform stops it: the API server has
	// created the object, but the provider's read of it afterwards is cancelled, so it
	// reports the create failed and terraform records nothing. Such an object, and no
	// other, is missing from the state; the id it is named after is not, so the rerun
	// applies the same object again rather than a second one.
	created := f.Items(g)
	g.Expect(created).To(HaveLen(gate.Index+1), "nothing was created past the gate")
	names, _ := f.StateItems(g)
	g.Expect(created).To(ContainElements(names))
	for _, name := range created {
		if !slices.Contains(names, name) {
			t.Logf("created when terraform was interrupted, not in the state: %s", name)
			g.Expect(f.Output.String()).To(ContainSubstring(f.Namespace + "/" + name + " failed to fetch resource from kubernetes"))
		}
	}
	f.ExpectNoLostStateEntry(g)

	gate.Open()
	f.newWorkDir()
	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.ExpectEachItemOnceInState(g, resources)
}

// A terraform that does not stop within its stop timeout is killed, and what it started
// (its provider plugins, a provisioner's shell) goes with it rather than running on
// beside the controller.
func TestATerraformKilledAfterItsStopTimeoutLeavesNoProcessBehind(t *testing.T) {
	g := NewWithT(t)
	const resources = 10
	f := newFixture(t, resources)
	gate := f.NewGate(4)
	f.WriteChainConfig(resources, gate)
	// Far too short for terraform to stop cleanly while a provisioner waits at the gate.
	f.settings.StopTimeout = time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := f.runWith(ctx, f.runner(run.Apply))
		ended <- err
	}()
	gate.WaitUntilReached()
	var terraform int
	for _, pid := range tftest.Descendants(os.Getpid()) {
		if tftest.Command(pid) == "terraform" {
			terraform = pid
		}
	}
	g.Expect(terraform).NotTo(BeZero(), "terraform runs")
	// terraform leads its own group; whatever a failed test leaves there goes now.
	t.Cleanup(func() { _ = syscall.Kill(-terraform, syscall.SIGKILL) })
	g.Expect(len(tftest.Group(terraform))).To(BeNumerically(">", 2), "terraform, its provider and the provisioner's shell")

	cancel()
	g.Eventually(ended).WithTimeout(time.Minute).Should(Receive(HaveOccurred()))
	g.Eventually(func() []int { return tftest.Group(terraform) }).WithTimeout(10*time.Second).Should(BeEmpty(),
		"processes terraform started outlive it")

	gate.Open()
	f.newWorkDir()
	// The stop timeout is also how long terraform's output may stay open after it exits:
	// a millisecond fails a rerun whose provider closes its end a little later.
	f.settings.StopTimeout = 0
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.ExpectEachItemOnceInState(g, resources)
}
