package kinds_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// slowLocalShoot is a shoot of the test provider "slowlocal": its apply creates a
// namespace, then one ConfigMap per step, each followed by a pause of the given seconds.
// The Infrastructure is not created yet.
func slowLocalShoot(t *testing.T, steps, seconds int) *shoot {
	t.Helper()
	s := newShoot(t)
	s.createSecret(t, adminKubeconfig(t))
	return slowLocalIn(s.namespace, s.infra.Name, steps, seconds)
}

// slowLocalIn is a "slowlocal" shoot in a namespace that holds its credentials already.
func slowLocalIn(namespace, name string, steps, seconds int) *shoot {
	s := newShootIn(namespace, name)
	s.infra.Spec.Type = "slowlocal"
	s.infra.Spec.ProviderConfig = &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"namespace":%q,"steps":%d,"seconds":%d}`, s.targetNamespace(), steps, seconds)}
	return s
}

// waitForStep waits until the apply created the ConfigMap of a step.
func (s *shoot) waitForStep(t *testing.T, step int) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(context.Background(), keyOf(s.targetNamespace(), fmt.Sprintf("step-%d", step)), &corev1.ConfigMap{})
	}).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// stepsLeft are the step ConfigMaps that exist in the target namespace.
func (s *shoot) stepsLeft(g Gomega) []string {
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(s.targetNamespace()))).To(Succeed())
	var steps []string
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "step-") {
			steps = append(steps, cm.Name)
		}
	}
	return steps
}

// runObjectsLeft are the run objects of the shoot's Infrastructure that exist.
func (s *shoot) runObjectsLeft(g Gomega) []string {
	ctx := context.Background()
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
	var left []string
	for _, name := range []string{objects.ConfigName(), objects.StateName()} {
		if err := env.Client.Get(ctx, keyOf(s.namespace, name), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			g.Expect(err).NotTo(HaveOccurred())
			left = append(left, name)
		}
	}
	for _, name := range []string{objects.VarsName(), objects.ID.CredentialsName(), objects.ID.OutputsName()} {
		if err := env.Client.Get(ctx, keyOf(s.namespace, name), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			g.Expect(err).NotTo(HaveOccurred())
			left = append(left, name)
		}
	}
	return left
}

// assertNothingWrittenAfterDeletion checks, once the Infrastructure is gone, that no run
// object exists and none comes back while a run the deletion left alone would still go on,
// and that no terraform works in the controller's run directories.
func assertNothingWrittenAfterDeletion(t *testing.T, s *shoot, dir string, runLasts time.Duration) {
	t.Helper()
	g := NewWithT(t)
	terraformPath, err := filepath.EvalSymlinks(testenv.Terraform(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(terraformRunsIn(terraformPath, dir)).To(BeZero(), "no terraform works for the Infrastructure once it is gone")
	g.Consistently(func(g Gomega) []string { return s.runObjectsLeft(g) }).
		WithTimeout(runLasts).WithPolling(250*time.Millisecond).Should(BeEmpty(), "no run object exists once the Infrastructure is gone")
	g.Expect(filepath.Join(dir, s.namespace, s.infra.Name+".infra")).NotTo(BeADirectory(), "the run directory is removed with the run objects")
}

// A deletion while the first apply is under way, before the run saved any state, waits
// for the apply (an interrupted create may leave a resource its provider never reported),
// then destroys what the state holds: nothing stays behind, and nothing is written for
// the Infrastructure after it is gone.
func TestDeletionDuringTheFirstApplyWaitsForItThenDestroysWhatItCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowLocalShoot(t, 3, 8)
	dir := workDir(t)
	c := startController(t, s.namespace, dir)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitForStep(t, 0)

	deleted := time.Now()
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)

	// Two more steps of 8 s each came after the first.
	g.Expect(time.Since(deleted)).To(BeNumerically(">=", 15*time.Second), "the deletion waited for the apply under way")
	g.Expect(c.output.String()).NotTo(ContainSubstring("Interrupt received"), "the apply was not interrupted")
	g.Expect(s.stepsLeft(g)).To(BeEmpty(), "what the apply created was destroyed")
	namespace := &corev1.Namespace{}
	// envtest runs no namespace controller: a deleted namespace stays Terminating.
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, namespace); err == nil {
		g.Expect(namespace.DeletionTimestamp).NotTo(BeNil(), "the namespace the apply created is deleted")
	}
	assertNothingWrittenAfterDeletion(t, s, dir, 10*time.Second)
	g.Expect(s.stepsLeft(g)).To(BeEmpty())
}

// A deletion while the first apply waits for a run slot drops the waiting run: there is
// nothing to destroy, and the run never starts.
func TestDeletionOfAnApplyWaitingForASlotDropsIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	busy := slowLocalShoot(t, 1, 20)
	s := slowLocalIn(busy.namespace, "waiting", 1, 1)
	dir := workDir(t)
	startControllerWith(t, busy.namespace, dir, env.Config, 2, func(a *controllerSetup) { a.Pipeline.MaxRuns = 1 })
	g.Expect(env.Client.Create(ctx, busy.infra)).To(Succeed())
	busy.waitForRunStart(t)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		last := s.get(g).Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		return last.Description
	}).WithTimeout(time.Minute).Should(ContainSubstring("waiting for a run slot"))

	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{}))).To(BeTrue(), "the dropped run created nothing")
	// The busy run holds the slot for about 20 s more; the dropped one must not follow it.
	g.Consistently(func(g Gomega) []string { return s.runObjectsLeft(g) }).
		WithTimeout(25 * time.Second).WithPolling(250 * time.Millisecond).Should(BeEmpty())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{}))).To(BeTrue(), "the dropped run never started")
}

// A force deletion during an apply stops the apply and waits for its final save before
// the run objects go: destroying nothing, it leaves what the apply created, and the
// stopped apply writes nothing afterwards.
func TestForceDeletionDuringAnApplyStopsItFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowLocalShoot(t, 3, 8)
	forceDeletionConfirmed(t, s)
	dir := workDir(t)
	c := startController(t, s.namespace, dir)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitForStep(t, 0)

	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(c.output.String()).To(ContainSubstring("Interrupt received"), "the force deletion stopped the apply under way")
	assertNothingWrittenAfterDeletion(t, s, dir, 20*time.Second)
	g.Expect(s.stepsLeft(g)).To(Equal([]string{"step-0"}), "the stopped apply went no further, and nothing was destroyed")
}

// An Infrastructure created again under the name of one that was force-deleted (Gardener
// reuses shoot namespaces' names) starts from a state of its own: it takes over neither
// the lineage nor the resources its predecessor's runs kept on this machine.
func TestARecreatedInfrastructureStartsFromAStateOfItsOwn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowLocalShoot(t, 1, 0)
	forceDeletionConfirmed(t, s)
	dir := workDir(t)
	startController(t, s.namespace, dir)
	first := s.infra.DeepCopy()
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	firstLineage := lineageOf(g, s)
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(filepath.Join(dir, s.namespace, s.infra.Name+".infra")).NotTo(BeADirectory(), "the run directory went with the run objects")

	// Its successor of the same name.
	s.infra = first
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(lineageOf(g, s)).NotTo(Equal(firstLineage), "the new Infrastructure's state is a lineage of its own")
}

// TestARunDirectoryLeftByAnEarlierOwnerIsNotTakenOver puts the state of an earlier owner
// of the name into the run directories a crash would have left, and checks that a new
// Infrastructure neither reads it nor keeps it.
func TestARunDirectoryLeftByAnEarlierOwnerIsNotTakenOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := slowLocalShoot(t, 1, 0)
	dir := workDir(t)
	earlier := `{"version":4,"terraform_version":"1.5.7","serial":7,"lineage":"0e0e0e0e-0000-0000-0000-000000000000","outputs":{},"resources":[]}`
	owners := filepath.Join(dir, s.namespace, s.infra.Name+".infra")
	for _, work := range []string{filepath.Join(owners, "work"), filepath.Join(owners, "11111111-2222-3333-4444-555555555555", "work")} {
		g.Expect(os.MkdirAll(work, 0o700)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(work, state.Key), []byte(earlier), 0o600)).To(Succeed())
	}
	startController(t, s.namespace, dir)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(lineageOf(g, s)).NotTo(Equal("0e0e0e0e-0000-0000-0000-000000000000"))
	entries, err := os.ReadDir(owners)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "only the new Infrastructure's run directory is kept")
	g.Expect(entries[0].Name()).To(Equal(string(s.get(g).UID)))
}

func lineageOf(g Gomega, s *shoot) string {
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), keyOf(s.namespace, objects.StateName()), cm)).To(Succeed())
	lineage := cm.Annotations[state.AnnotationLineage]
	g.Expect(lineage).NotTo(BeEmpty())
	return lineage
}

// forceDeletionConfirmed makes the shoot's Cluster say that its owner confirmed force deletion.
func forceDeletionConfirmed(t *testing.T, s *shoot) {
	t.Helper()
	cluster := &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: s.namespace},
		Spec: extensionsv1alpha1.ClusterSpec{
			Shoot: runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"shoot",` +
				`"deletionTimestamp":"2026-11-23T00:00:00Z","annotations":{"confirmation.gardener.cloud/force-deletion":"true"}}}`)},
			Seed:         &runtime.RawExtension{Raw: []byte(`{}`)},
			CloudProfile: runtime.RawExtension{Raw: []byte(`{}`)},
		},
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), cluster)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
}

// A replica that took the lease over holds its runs until the former leader's could have
// stopped and saved (executor.HoldAfterTakeover). A forced deletion and a migration, which
// run nothing, wait for the hold too: the former leader's run, on another machine, may
// still save the state whose objects they remove, and would leave them behind.
func TestWhatRemovesAStateWithoutARunWaitsForTheFormerLeadersRuns(t *testing.T) {
	for name, remove := range map[string]func(g Gomega, s *shoot){
		"forced deletion": func(g Gomega, s *shoot) { g.Expect(env.Client.Delete(context.Background(), s.get(g))).To(Succeed()) },
		"migration":       func(g Gomega, s *shoot) { annotate(g, s, extension.OperationMigrate) },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			s := newShoot(t, "10.250.0.0/19")
			s.createSecret(t, adminKubeconfig(t))
			forceDeletionConfirmed(t, s)
			var local *executor.LocalExecutor
			startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(setup *controllerSetup) {
				local = setup.Executor.(*executor.LocalExecutor)
			})
			g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
			s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

			heldUntil := time.Now().Add(15 * time.Second)
			local.HoldRunsUntil(heldUntil)
			remove(g, s)
			g.Eventually(func(g Gomega) string { return s.get(g).Status.LastOperation.Description }).
				WithTimeout(5 * time.Second).Should(ContainSubstring("an earlier controller process started"))
			g.Consistently(func(g Gomega) []string { return s.runObjectsLeft(g) }).
				WithTimeout(time.Until(heldUntil)-time.Second).ShouldNot(BeEmpty(), "the run objects stay while the former leader's run may write them")
			g.Eventually(func(g Gomega) []string { return s.runObjectsLeft(g) }).WithTimeout(time.Minute).Should(BeEmpty())
			g.Expect(time.Now()).To(BeTemporally(">=", heldUntil))
		})
	}
}
