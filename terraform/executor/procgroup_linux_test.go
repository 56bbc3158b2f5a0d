package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/procfs"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// runHelper, with TERRASEED_TEST_HELPER_RUN set, makes the test binary a controller
// process that runs one apply with the local executor: a test SIGKILLs it as a controller
// is killed. It runs the apply the helper's environment describes, and returns its exit code.
func runHelper() int {
	config, err := clientcmd.RESTConfigFromKubeConfig([]byte(os.Getenv("TERRASEED_TEST_HELPER_KUBECONFIG")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := client.New(config, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e := &LocalExecutor{
		Client: c,
		Settings: terraformer.Settings{
			Terraform: os.Getenv("TERRASEED_TEST_HELPER_TERRAFORM"),
			Plugins:   terraformer.Plugins{Mirror: os.Getenv("TERRASEED_TEST_HELPER_MIRROR")},
		},
		BaseDir: os.Getenv("TERRASEED_TEST_HELPER_BASEDIR"),
		Output:  os.Stderr,
	}
	id := run.ID{Namespace: os.Getenv("TERRASEED_TEST_HELPER_NAMESPACE"), Name: os.Getenv("TERRASEED_TEST_HELPER_NAME"), Purpose: run.PurposeInfra}
	_, err = e.Run(context.Background(), run.Request{ID: id, Command: run.Apply, Env: map[string]string{"TF_VAR_kubeconfig": os.Getenv("TERRASEED_TEST_HELPER_TF_KUBECONFIG")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// processesIn are the processes working in dir or below it, by pid, with their command.
func processesIn(t testing.TB, dir string) map[int]string {
	t.Helper()
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	procs, _ := procfs.AllProcs()
	found := map[int]string{}
	for _, p := range procs {
		cwd, err := p.Cwd()
		if err != nil || (cwd != resolved && !strings.HasPrefix(cwd, resolved+"/")) {
			continue
		}
		comm, _ := p.Comm()
		found[p.PID] = comm
	}
	return found
}

// A controller killed while its local run's terraform works (SIGKILL: no code of it runs
// after) takes its terraform along (its parent-death signal), but not what terraform
// started: its provider plugins and a provisioner's shell, in terraform's process group,
// run on with their group's leader gone. The next run of the executor in the same
// directory, a plan here, ends them before it starts; nothing of either run is left
// working there, and the apply after goes on.
func TestARunOfAKilledControllerLeavesNoProcessBehindTheNextRun(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 0)
	gate := f.NewGate(1)
	f.WriteChainConfig(2, gate)
	admin, err := env.AdminKubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), "TERRASEED_TEST_HELPER_RUN=1",
		"TERRASEED_TEST_HELPER_KUBECONFIG="+string(admin),
		"TERRASEED_TEST_HELPER_TERRAFORM="+f.executor.Settings.Terraform,
		"TERRASEED_TEST_HELPER_MIRROR="+f.executor.Settings.Plugins.Mirror,
		"TERRASEED_TEST_HELPER_BASEDIR="+f.executor.BaseDir,
		"TERRASEED_TEST_HELPER_NAMESPACE="+f.Objects.ID.Namespace,
		"TERRASEED_TEST_HELPER_NAME="+f.Objects.ID.Name,
		"TERRASEED_TEST_HELPER_TF_KUBECONFIG="+f.Kubeconfig)
	helper.Stdout, helper.Stderr = f.Output, f.Output
	g.Expect(helper.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	// Whatever a failed test leaves goes with it.
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		for pid := range processesIn(t, f.executor.BaseDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	gate.WaitUntilReached()
	started := processesIn(t, f.executor.BaseDir)
	g.Expect(started).To(ContainElement("terraform"))
	g.Expect(len(started)).To(BeNumerically(">", 1), "terraform and what it started (a provisioner's shell) work in the run directory: %v", started)

	g.Expect(helper.Process.Signal(syscall.SIGKILL)).To(Succeed())
	g.Eventually(exited).WithTimeout(10 * time.Second).Should(Receive())
	g.Eventually(func() map[int]string { return processesIn(t, f.executor.BaseDir) }).WithTimeout(10*time.Second).
		ShouldNot(ContainElement("terraform"), "terraform dies with the controller")
	left := processesIn(t, f.executor.BaseDir)
	g.Expect(left).NotTo(BeEmpty(), "what terraform started outlives it: what the next run must end")
	for pid := range left {
		pgid, err := syscall.Getpgid(pid)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(groupLeaderGone(pgid)).To(BeTrue(), "the leader of the group of %d (%s) is gone", pid, left[pid])
	}

	// The provisioner's shell waits at the closed gate forever: nothing but the next run
	// ends it. A plan runs no provisioner.
	var shells []int
	for pid, command := range left {
		if command == "sh" {
			shells = append(shells, pid)
		}
	}
	g.Expect(shells).NotTo(BeEmpty(), "the provisioner's shell outlives terraform: %v", left)
	g.Consistently(func(g Gomega) {
		for _, pid := range shells {
			g.Expect(running(pid)).To(BeTrue())
		}
	}).WithTimeout(2 * time.Second).Should(Succeed())
	_, err = f.run(run.Plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() map[int]string { return processesIn(t, f.executor.BaseDir) }).WithTimeout(10*time.Second).Should(BeEmpty(),
		"no process of either run works in the run directory")
	for _, pid := range shells {
		g.Expect(running(pid)).To(BeFalse(), "the shell %d of the killed run has ended", pid)
	}

	gate.Open()
	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred(), "the run after goes on where the killed one stopped")
}

// running says whether pid is a process that has not ended: an ended one may stay a
// zombie where its parent died and nobody reaps it.
func running(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	stat, err := p.Stat()
	return err == nil && stat.State != "Z" && stat.State != "X"
}

// A terraform of a local run that someone SIGKILLs cannot stop what it started; the run
// ends its process group, so that nothing of it (a provisioner's shell, the provider
// plugins) runs on in the run directory, and the run fails.
func TestASigkilledTerraformOfALocalRunLeavesNoProcessBehind(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 0)
	gate := f.NewGate(1)
	f.WriteChainConfig(2, gate)
	ended := make(chan error, 1)
	go func() {
		_, err := f.run(run.Apply)
		ended <- err
	}()
	t.Cleanup(func() {
		for pid := range processesIn(t, f.executor.BaseDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	gate.WaitUntilReached()
	started := processesIn(t, f.executor.BaseDir)
	terraform := 0
	for pid, command := range started {
		if command == "terraform" {
			terraform = pid
		}
	}
	g.Expect(terraform).NotTo(BeZero(), "terraform works in the run directory: %v", started)
	g.Expect(len(started)).To(BeNumerically(">", 1), "and what it started: %v", started)

	g.Expect(syscall.Kill(terraform, syscall.SIGKILL)).To(Succeed())
	g.Eventually(ended).WithTimeout(time.Minute).Should(Receive(HaveOccurred()))
	g.Eventually(func() map[int]string { return processesIn(t, f.executor.BaseDir) }).WithTimeout(10*time.Second).Should(BeEmpty(),
		"nothing terraform started runs on")
	for pid := range started {
		g.Expect(running(pid)).To(BeFalse(), "process %d (%s) has ended", pid, started[pid])
	}
}
