package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/internal/gardener/errorcodes"
	"github.com/terraseed/terraseed/internal/terraform/run"
	"github.com/terraseed/terraseed/internal/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// startTerraformer starts the terraformer process a run pod runs, on this machine,
// without waiting for it. It returns the process and the path of its termination message.
func (f *fixture) startTerraformer(command run.Command) (*exec.Cmd, string) {
	f.t.Helper()
	g := NewWithT(f.t)
	dir := filepath.Join(f.executor.BaseDir, f.objects.ID.Dir())
	g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	kubeconfig, termination := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "termination-message")
	g.Expect(writeKubeconfig(env.Config, kubeconfig)).To(Succeed())
	req := f.request(command)
	args := append([]string{string(command),
		"--namespace", req.ID.Namespace, "--name", req.ID.Name, "--purpose", string(req.ID.Purpose),
		"--kubeconfig", kubeconfig,
		"--work-dir", workDirOf(dir),
		"--terraform", f.executor.Settings.Terraform,
		"--plugin-mirror", f.executor.Settings.Plugins.Mirror,
		"--termination-message-path", termination,
		"--report-file", reportFileOf(dir),
	}, runArgs(req)...)
	cmd := exec.Command(testenv.TerraformerBinary(f.t), args...)
	cmd.Env = runEnv(homeOf(dir), os.TempDir(), req.Env)
	cmd.Stdout, cmd.Stderr = f.output, f.output
	g.Expect(cmd.Start()).To(Succeed())
	return cmd, termination
}

// runFailure reads the error of a terraformer process that failed from its termination message.
func runFailure(g Gomega, termination string) *run.Error {
	data, err := os.ReadFile(termination)
	g.Expect(err).NotTo(HaveOccurred())
	_, re, ok := run.ParseTerminationMessage(string(data))
	g.Expect(ok).To(BeTrue(), "a failed run's termination message: %s", data)
	return re
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

// writeChainConfig writes a configuration of n pairs of a terraform_data, whose id
// terraform generates when it creates it, and a ConfigMap named after that id, each pair
// depending on the one before, so that terraform creates them interleaved, one at a
// time. A state entry lost by a killed run shows up as a second ConfigMap of the pair
// rather than being adopted again.
//
// Before the pair at each index of gates stands a gate, which the pairs after it wait
// for: a terraform_data whose provisioner marks the gate reached and waits until the
// test opens it. The pair at the gate's index goes on beside it, so that a run stopped
// at a gate may be in the middle of a create, as anywhere in an apply, and yet is sure
// not to have finished.
func (f *fixture) writeChainConfig(n int, gates ...*gate) {
	f.t.Helper()
	var b strings.Builder
	b.WriteString("variable \"gates\" {\n  type = string\n}\n\n")
	waitFor := map[int]string{}
	for _, gate := range gates {
		fmt.Fprintf(&b, `resource "terraform_data" "gate_%[1]d" {
  depends_on = [kubectl_manifest.item_%[2]d]
  provisioner "local-exec" {
    command = "touch \"$REACHED\" && until [ -e \"$OPEN\" ]; do sleep 0.05; done"
    environment = {
      REACHED = "${var.gates}/%[1]d.reached"
      OPEN    = "${var.gates}/%[1]d.open"
    }
  }
}

`, gate.index, gate.index-1)
		waitFor[gate.index+1] = fmt.Sprintf(", terraform_data.gate_%d", gate.index)
	}
	for i := range n {
		dependsOn := ""
		if i > 0 {
			dependsOn = fmt.Sprintf("  depends_on = [kubectl_manifest.item_%d%s]\n", i-1, waitFor[i])
		}
		fmt.Fprintf(&b, `resource "terraform_data" "id_%[1]d" {
%[2]s}

resource "kubectl_manifest" "item_%[1]d" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "item-${terraform_data.id_%[1]d.id}"
      namespace = var.namespace
      labels    = { "terraseed-test" = "item" }
    }
  })
}

`, i, dependsOn)
	}
	files := map[string]string{"main.tf": b.String()}
	for _, name := range []string{"provider.tf", "variables.tf"} {
		content, err := os.ReadFile(filepath.Join("testdata/kubectl", name))
		NewWithT(f.t).Expect(err).NotTo(HaveOccurred())
		files[name] = string(content)
	}
	ctx := context.Background()
	NewWithT(f.t).Expect(f.objects.WriteConfig(ctx, env.Client, files)).To(Succeed())
	vars, err := json.Marshal(map[string]any{"namespace": f.namespace, "resources": n, "gates": f.gates})
	NewWithT(f.t).Expect(err).NotTo(HaveOccurred())
	NewWithT(f.t).Expect(f.objects.WriteVars(ctx, env.Client, vars)).To(Succeed())
}

// gate holds up a chain configuration's apply before the pair at index.
type gate struct {
	f     *fixture
	index int
}

// newGate makes a gate before the pair at index, where index ConfigMaps exist already.
func (f *fixture) newGate(index int) *gate {
	f.t.Helper()
	if f.gates == "" {
		f.gates = f.t.TempDir()
	}
	return &gate{f: f, index: index}
}

// waitUntilReached waits until the gate is reached with everything before it in the
// stored state, and the pair beside it has created its ConfigMap: a kill now lands
// right after a create, as it may anywhere, and before the apply could finish.
func (g *gate) waitUntilReached() {
	g.f.t.Helper()
	NewWithT(g.f.t).Eventually(func(gm Gomega) {
		_, err := os.Stat(filepath.Join(g.f.gates, fmt.Sprintf("%d.reached", g.index)))
		gm.Expect(err).NotTo(HaveOccurred(), "the gate is not reached yet")
		stored, _ := g.f.stateItems(gm)
		gm.Expect(len(stored)).To(BeNumerically(">=", g.index))
		gm.Expect(g.f.items(gm)).To(HaveLen(g.index + 1))
	}).WithTimeout(2 * time.Minute).WithPolling(10 * time.Millisecond).Should(Succeed())
}

// open lets every run from now on pass the gate.
func (g *gate) open() {
	g.f.t.Helper()
	NewWithT(g.f.t).Expect(os.WriteFile(filepath.Join(g.f.gates, fmt.Sprintf("%d.open", g.index)), nil, 0o644)).To(Succeed())
}

// expectNoLostStateEntry checks that every object in the cluster can be found again from
// the stored state: the state lists it, or at least the id it was named after (its create
// was in flight at the kill, and a rerun applies the same name again). An object whose id
// the state does not hold would be created a second time under a new name.
func (f *fixture) expectNoLostStateEntry(g Gomega) (created, listed int) {
	items := f.items(g)
	names, ids := f.stateItems(g)
	for _, item := range items {
		g.Expect(ids).To(ContainElement(strings.TrimPrefix(item, "item-")), "the stored state lost the id of %s", item)
	}
	g.Expect(items).To(ContainElements(names))
	return len(items), len(names)
}

func TestKilledApplyLeavesEveryResourceExactlyOnce(t *testing.T) {
	g := NewWithT(t)
	const resources = 20
	f := newFixture(t, resources)
	// Early, in the middle and late in the apply.
	gates := []*gate{f.newGate(1), f.newGate(9), f.newGate(17)}
	f.writeChainConfig(resources, gates...)

	// Each run starts where the killed one stopped, in a fresh working directory, as a
	// new run pod would, passes the gates opened before and stops at the next.
	for _, gate := range gates {
		f.executor.BaseDir = t.TempDir()
		cmd, _ := f.startTerraformer(run.Apply)
		gate.waitUntilReached()
		victims := descendants(cmd.Process.Pid)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		err := cmd.Wait()
		var exitErr *exec.ExitError
		g.Expect(errors.As(err, &exitErr)).To(BeTrue(), "the terraformer was killed")
		created, listed := f.expectNoLostStateEntry(g)
		t.Logf("killed at the gate before pair %d (terraformer and %d children): %d created, %d in the stored state", gate.index, len(victims)-1, created, listed)
		g.Expect(created).To(Equal(gate.index+1), "nothing was created past the gate")
		gate.open()
	}

	f.executor.BaseDir = t.TempDir()
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.expectEachItemOnceInState(g, resources)
}

func TestSigtermStopsTerraformCleanlyAndSavesTheState(t *testing.T) {
	g := NewWithT(t)
	const resources = 20
	f := newFixture(t, resources)
	gate := f.newGate(4)
	f.writeChainConfig(resources, gate)

	cmd, termination := f.startTerraformer(run.Apply)
	gate.waitUntilReached()
	g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	g.Expect(cmd.Wait()).To(HaveOccurred())
	g.Expect(cmd.ProcessState.ExitCode()).To(Equal(1), "the terraformer exited by itself, not by the signal")
	g.Expect(children(cmd.Process.Pid)).To(BeEmpty())
	g.Expect(f.output.String()).To(ContainSubstring("Interrupt received"))

	runErr := runFailure(g, termination)
	g.Expect(runErr.Error()).To(ContainSubstring("interrupted"))
	re := expectRunError(g, runErr)
	g.Expect(re.Invalid).To(BeFalse())
	g.Expect(errorcodes.Retryable(codesOf(re))).To(BeTrue(), "an interrupted run is retried")

	// The stored state is terraform's last word, the state file it left.
	local, err := os.ReadFile(filepath.Join(f.executor.BaseDir, f.objects.ID.Dir(), "work", state.StateKey))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.objects.ReadState(context.Background(), env.Client)).To(Equal(local))

	// On an interrupt terraform starts nothing new and waits for what is in flight; the
	// state records every create a provider reported done. The kubectl provider, though,
	// gives up on the create in flight when terraform stops it: the API server has
	// created the object, but the provider's read of it afterwards is cancelled, so it
	// reports the create failed and terraform records nothing. Such an object, and no
	// other, is missing from the state; the id it is named after is not, so the rerun
	// applies the same object again rather than a second one.
	created := f.items(g)
	g.Expect(created).To(HaveLen(gate.index+1), "nothing was created past the gate")
	names, _ := f.stateItems(g)
	g.Expect(created).To(ContainElements(names))
	for _, name := range created {
		if !slices.Contains(names, name) {
			t.Logf("created when terraform was interrupted, not in the state: %s", name)
			g.Expect(f.output.String()).To(ContainSubstring(f.namespace + "/" + name + " failed to fetch resource from kubernetes"))
		}
	}
	f.expectNoLostStateEntry(g)

	gate.open()
	f.executor.BaseDir = t.TempDir()
	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	f.expectEachItemOnceInState(g, resources)
}
