package terraformer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/test/testenv"
)

// watchTerraform samples, until the returned function is called, the terraform processes
// a Runner in this process starts in a directory under dir, and returns their commands in
// the order they started. terraform re-executes itself once to catch its own panics: only a
// process whose parent is this process counts. `terraform version` lives for a few
// milliseconds and may be missed; the commands that plan or change anything may not.
func watchTerraform(t *testing.T, dir string) func() []string {
	t.Helper()
	terraform, err := filepath.EvalSymlinks(testenv.Terraform(t))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	self := os.Getpid()
	var (
		mu       sync.Mutex
		seen     = map[int]bool{}
		commands []string
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			procs, _ := procfs.AllProcs()
			for _, p := range procs {
				if exe, _ := p.Executable(); seen[p.PID] || exe != terraform {
					continue
				}
				stat, err := p.Stat()
				if err != nil || stat.PPID != self {
					continue
				}
				cwd, err := p.Cwd()
				args, err2 := p.CmdLine()
				if err != nil || err2 != nil || !strings.HasPrefix(cwd, dir) || len(args) < 2 {
					continue
				}
				mu.Lock()
				seen[p.PID] = true
				commands = append(commands, args[1])
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(stop)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return slices.DeleteFunc(slices.Clone(commands), func(c string) bool { return c == "version" })
	}
}

// exeOf is the executable pid runs, "" when it is gone.
func exeOf(pid int) string {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ""
	}
	exe, _ := p.Executable()
	return exe
}

// runWatched runs an apply with protected types and returns its result, the terraform
// commands it ran, and its error.
func (f *fixture) runWatched(t *testing.T, protected ...string) (*run.Result, []string, error) {
	r := f.runner(run.Apply)
	r.ProtectedTypes = protected
	commands := watchTerraform(t, f.workDir)
	result, err := f.runWith(context.Background(), r)
	return result, commands(), err
}

// stateVersion is the resourceVersion of the state ConfigMap: it changes with every write.
func (f *fixture) stateVersion(g Gomega) string {
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.StateName()}, cm)).To(Succeed())
	return cm.ResourceVersion
}

// configVersion is the resourceVersion of the configuration ConfigMap.
func (f *fixture) configVersion(g Gomega) string {
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ConfigName()}, cm)).To(Succeed())
	return cm.ResourceVersion
}

// publishedPlan is the plan the run reported beside it, which the executor reads.
func (f *fixture) publishedPlan(g Gomega) *plan.Summary {
	data, err := os.ReadFile(f.reportFile)
	g.Expect(err).NotTo(HaveOccurred())
	published := map[string]string{}
	g.Expect(json.Unmarshal(data, &published)).To(Succeed())
	g.Expect(published).To(HaveKey(report.AnnotationPlan))
	plan := &plan.Summary{}
	g.Expect(json.Unmarshal([]byte(published[report.AnnotationPlan]), plan)).To(Succeed())
	return plan
}

// Over an empty state nothing can be destroyed: a create is one terraform apply, protected
// types or not, and its plan is recorded from what the apply showed before applying.
func TestCreateFromAnEmptyStateIsOneApply(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 3)

	result, commands, err := f.runWatched(t, "kubectl_manifest")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands).To(Equal([]string{"init", "apply"}))
	g.Expect(result.Phases).To(And(HaveLen(2), HaveKey("init"), HaveKey("apply")))
	f.ExpectEachItemOnceInState(g, 3)
	g.Expect(result.Plan.Addresses("create")).To(ConsistOf(
		"terraform_data.id[0]", "terraform_data.id[1]", "terraform_data.id[2]",
		"kubectl_manifest.item[0]", "kubectl_manifest.item[1]", "kubectl_manifest.item[2]"))
	g.Expect(result.Plan.Summary(10)).To(HavePrefix("6 to add"))
	g.Expect(f.publishedPlan(g)).To(Equal(result.Plan))
}

// Gardener asks for a reconcile on every shoot reconcile. With nothing to change it is one
// terraform process and writes no state: one plan where the plan is checked (protected
// types over a state holding resources), one apply where it is not. The working directory
// is initialised for the configuration already, so init does not run either.
func TestReconcileWithNothingToChangeIsOneProcessAndWritesNoState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		protected []string
		command   string
	}{
		{name: "checked", protected: []string{"kubectl_manifest"}, command: "plan"},
		{name: "unguarded", command: "apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFixture(t, 3)
			_, err := f.run(run.Apply)
			g.Expect(err).NotTo(HaveOccurred())
			stored, config := f.stateVersion(g), f.configVersion(g)

			result, commands, err := f.runWatched(t, tc.protected...)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(commands).To(Equal([]string{tc.command}), "one terraform process")
			g.Expect(result.Phases).To(And(HaveLen(1), HaveKey(tc.command)))
			g.Expect(f.stateVersion(g)).To(Equal(stored), "no state written")
			g.Expect(f.configVersion(g)).To(Equal(config), "the progress and the plan are reported beside the run, not on the configuration")
			g.Expect(result.Plan).NotTo(BeNil())
			g.Expect(result.Plan.HasChanges()).To(BeFalse())
			g.Expect(f.publishedPlan(g).HasChanges()).To(BeFalse())
			f.ExpectEachItemOnceInState(g, 3)
		})
	}
}

// A reconcile that checks its plan still repairs drift: an object deleted behind
// terraform's back is planned and created again, from exactly the plan checked.
func TestCheckedReconcileRepairsDrift(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 3)
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	items := f.Items(g)
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: items[0]}})).To(Succeed())

	result, commands, err := f.runWatched(t, "kubectl_manifest")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands).To(Equal([]string{"plan", "apply"}))
	g.Expect(result.Phases).To(And(HaveLen(2), HaveKey("plan"), HaveKey("apply")))
	g.Expect(result.Plan.Addresses("create")).To(HaveLen(1))
	g.Expect(f.Items(g)).To(Equal(items), "the deleted object is back")
}

// The guard keeps its meaning: over a state holding resources, a plan that destroys one of
// a protected type is refused after the plan, before anything changed.
func TestGuardRefusesToDestroyAProtectedResource(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 3)
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	stored := f.stateVersion(g)
	vars, err := json.Marshal(map[string]any{"namespace": f.Namespace, "resources": 2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Objects.WriteVars(context.Background(), env.Client, vars)).To(Succeed())

	_, commands, err := f.runWatched(t, "kubectl_manifest")
	re := tftest.ExpectRunError(g, err)
	g.Expect(err).To(MatchError(run.ErrDestroyProtected))
	g.Expect(re.Message).To(And(ContainSubstring("kubectl_manifest.item[2] (delete)"), ContainSubstring("nothing was changed")))
	g.Expect(commands).To(Equal([]string{"plan"}), "refused after the plan")
	g.Expect(f.stateVersion(g)).To(Equal(stored))
	f.ExpectEachItemOnceInState(g, 3)
	g.Expect(f.publishedPlan(g).Addresses("delete")).To(ConsistOf("terraform_data.id[2]", "kubectl_manifest.item[2]"))
}

// niceOf is the nice value of a process, or false when it is gone.
func niceOf(pid int) (int, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, false
	}
	stat, err := p.Stat()
	return stat.Nice, err == nil
}

// backgroundNice is the nice value the local executor gives a background run.
const backgroundNice = 10

// A background run (a drift plan) and every process it starts yield the CPU to the runs
// others wait for; any other run keeps this process's priority.
func TestBackgroundRunsYieldTheCPU(t *testing.T) {
	own, ok := niceOf(os.Getpid())
	NewWithT(t).Expect(ok).To(BeTrue())
	for _, tc := range []struct {
		name       string
		background bool
		nice       int
	}{
		{name: "background", background: true, nice: backgroundNice},
		{name: "foreground", nice: own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newFixture(t, 2)
			gate := f.NewGate(1)
			f.WriteChainConfig(2, gate)
			terraform, err := filepath.EvalSymlinks(testenv.Terraform(t))
			g.Expect(err).NotTo(HaveOccurred())

			r := f.runner(run.Apply)
			if tc.background {
				r.Nice = backgroundNice
			}
			done, finished := make(chan error, 1), make(chan struct{})
			go func() {
				defer close(finished)
				_, err := f.runWith(context.Background(), r)
				done <- err
			}()
			// A failed check below leaves no run waiting at the gate for the next test.
			t.Cleanup(func() {
				gate.Open()
				<-finished
			})
			gate.WaitUntilReached()
			// terraform and the provisioner's shell; the provider's process and the shell's
			// sleep come and go.
			var processes []int
			for _, pid := range tftest.Children(os.Getpid()) {
				if exeOf(pid) == terraform {
					processes = append(processes, tftest.Descendants(pid)...)
				}
			}
			g.Expect(len(processes)).To(BeNumerically(">=", 2))
			for _, pid := range processes {
				if nice, alive := niceOf(pid); alive {
					g.Expect(nice).To(Equal(tc.nice), "process %d (%s)", pid, exeOf(pid))
				}
			}
			gate.Open()
			g.Expect(<-done).To(Succeed())
		})
	}
}

// loggingTerraform is a script that records each command it is started with in a file,
// then runs the real terraform with it.
func loggingTerraform(t *testing.T) (binary string, commands func() []string) {
	t.Helper()
	dir := t.TempDir()
	binary, log := filepath.Join(dir, "terraform"), filepath.Join(dir, "commands")
	script := "#!/bin/sh\necho \"$1\" >> " + log + "\nexec " + testenv.Terraform(t) + " \"$@\"\n"
	NewWithT(t).Expect(os.WriteFile(binary, []byte(script), 0o755)).To(Succeed())
	return binary, func() []string {
		data, err := os.ReadFile(log)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(os.Remove(log)).To(Succeed())
		return strings.Fields(string(data))
	}
}

// A run checks the binary's version once per working directory: the next run of the same
// binary there starts no `terraform version`, a changed binary is checked again.
func TestTheVersionIsCheckedOncePerBinaryAndWorkingDirectory(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 2)
	binary, commands := loggingTerraform(t)
	f.settings.Terraform = binary

	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"version", "init", "apply"}))

	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"apply"}), "one terraform process")

	later := time.Now().Add(time.Minute)
	g.Expect(os.Chtimes(binary, later, later)).To(Succeed())
	_, err = f.run(run.Plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"version", "init", "plan"}), "a changed binary is checked, and initialises again")
}

// A create in a new working directory, of a binary this process checked already, starts
// terraform twice, as `terraform init && terraform apply` does: its init asks no version,
// nor does a validation's validate.
func TestACreateOfACheckedBinaryStartsInitAndApplyOnly(t *testing.T) {
	g := NewWithT(t)
	binary, commands := loggingTerraform(t)
	first := newFixture(t, 2)
	first.settings.Terraform = binary
	_, err := first.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"version", "init", "apply"}))

	second := newFixture(t, 2)
	second.settings.Terraform = binary
	g.Expect(second.workDir).NotTo(Equal(first.workDir))
	_, err = second.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"init", "apply"}))

	// Nor does a validation.
	third := newFixture(t, 2)
	third.settings.Terraform = binary
	_, err = third.run(run.Validate)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"init", "validate"}))
}
