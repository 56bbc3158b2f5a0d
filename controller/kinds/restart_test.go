package kinds_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// terraformRunsIn counts the terraform commands that work on a state (apply, destroy,
// plan) in dir. terraform re-executes itself once to catch its own panics, so a process
// whose parent is terraform is part of its parent's command.
func terraformRunsIn(terraformPath, dir string) int {
	procs, _ := procfs.AllProcs()
	count := 0
	for _, p := range procs {
		if !isTerraform(p, terraformPath) {
			continue
		}
		if stat, err := p.Stat(); err != nil || isTerraformPID(stat.PPID, terraformPath) {
			continue
		}
		args, err := p.CmdLine()
		if err != nil || len(args) < 2 || !slices.Contains([]string{"apply", "destroy", "plan"}, args[1]) {
			continue
		}
		if cwd, err := p.Cwd(); err == nil && strings.HasPrefix(cwd, dir) {
			count++
		}
	}
	return count
}

func isTerraform(p procfs.Proc, terraformPath string) bool {
	exe, err := p.Executable()
	return err == nil && exe == terraformPath
}

func isTerraformPID(pid int, terraformPath string) bool {
	p, err := procfs.NewProc(pid)
	return err == nil && isTerraform(p, terraformPath)
}

// slowShoot is a shoot of the test provider "slow", whose steps sleep as configured, with
// its credentials; its Infrastructure is not created yet.
func slowShoot(t *testing.T, config string) *shoot {
	t.Helper()
	ns := env.Namespace(t)
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"},
		Data:       map[string][]byte{"token": []byte("secret-token")},
	})).To(Succeed())
	return &shoot{namespace: ns, infra: &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infrastructure"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "slow", ProviderConfig: &runtime.RawExtension{Raw: []byte(config)}},
			Region:      "local-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider"},
		},
	}}
}

// waitForRunStart waits until a run owns the run objects: its finalizer is on the state ConfigMap.
func (s *shoot) waitForRunStart(t *testing.T) {
	t.Helper()
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
	NewWithT(t).Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(context.Background(), keyOf(s.namespace, objects.StateName()), cm)).To(Succeed())
		g.Expect(cm.Finalizers).To(ContainElement(state.Finalizer))
	}).WithTimeout(time.Minute).Should(Succeed())
}

func TestRestartedControllerDoesNotStartASecondRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowShoot(t, `{"steps":4,"seconds":6}`)
	ns, infra := s.namespace, s.infra
	dir := workDir(t)
	terraformPath, err := filepath.EvalSymlinks(testenv.Terraform(t))
	g.Expect(err).NotTo(HaveOccurred())

	// Sample the terraform processes working on this Infrastructure for the whole test.
	maxConcurrent := make(chan int, 1)
	stopSampling := make(chan struct{})
	go func() {
		highest := 0
		for {
			select {
			case <-stopSampling:
				maxConcurrent <- highest
				return
			case <-time.After(20 * time.Millisecond):
				highest = max(highest, terraformRunsIn(terraformPath, dir))
			}
		}
	}()

	first := startController(t, ns, dir)
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())
	s.waitForRunStart(t)
	objects := state.RunObjects{ID: run.ID{Namespace: ns, Name: infra.Name, Purpose: run.PurposeInfra}}

	// A second controller on the same machine comes up while the run goes on, as after a
	// restart whose predecessor's run has not ended yet. Each step of the run sleeps 6 s,
	// time enough for it to start even on a loaded machine.
	second := startController(t, ns, dir)
	g.Eventually(second.output.String).WithTimeout(time.Minute).Should(ContainSubstring(run.ErrRunInProgress.Error()))

	done := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(done.Status.LastError).To(BeNil())
	close(stopSampling)
	g.Expect(<-maxConcurrent).To(Equal(1), "exactly one terraform process worked on the state at a time")
	first.stop()
	second.stop()

	state, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(string(state), `"index_key"`)).To(Equal(4), "the state holds the four steps once each")
}

// A controller that stops (a rolling update, a lost lease) interrupts its runs; that is
// no failure of the operation, which the next controller goes on with.
func TestStoppingDuringARunRecordsNoFailure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowShoot(t, `{"steps":2,"seconds":30}`)
	ns, infra := s.namespace, s.infra
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())

	controller := startController(t, ns, workDir(t))
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateProcessing)
	s.waitForRunStart(t)
	controller.stop()

	// The event of the start arrives; no failure follows it.
	g.Eventually(func(g Gomega) []string { return eventReasons(g, ns, infra.Name) }).WithTimeout(30 * time.Second).Should(ContainElement("CreateProcessing"))
	g.Consistently(func(g Gomega) []string { return eventReasons(g, ns, infra.Name) }).WithTimeout(2 * time.Second).ShouldNot(ContainElement("CreateError"))
	g.Expect(s.get(g).Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateProcessing))
}

func eventReasons(g Gomega, namespace, name string) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(namespace))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}
