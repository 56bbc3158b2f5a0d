package kinds_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/state"
)

// boundedTo gives the controller a bound of bytes per state (--max-state-size), the
// actuator and the executor alike.
func boundedTo(bound int) actuatorOption {
	return func(a *controllerSetup) {
		a.State.MaxSize = bound
		switch e := a.Executor.(type) {
		case countedRuns:
			e.State.MaxSize = bound
		case *executor.LocalExecutor:
			e.State.MaxSize = bound
		}
	}
}

// storedObjects are the resourceVersions of the state object, its parts and its history,
// by name: what a recovery would write.
func storedObjects(g Gomega, objects state.RunObjects) map[string]string {
	versions := map[string]string{}
	names := append([]string{objects.StateName(), objects.HistoryName()}, objects.PartNames()...)
	for _, name := range names {
		obj := objects.Storage.Object()
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: objects.ID.Namespace, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		versions[name] = obj.GetResourceVersion()
	}
	return versions
}

// refusedReconcile asks for a reconcile and waits until it erred (not failed: it is no
// invalid input) with a description holding every one of says; it returns the
// Infrastructure then.
func refusedReconcile(t *testing.T, s *shoot, says ...string) *extensionsv1alpha1.Infrastructure {
	t.Helper()
	g := NewWithT(t)
	annotate(g, s, extension.OperationReconcile)
	var infra *extensionsv1alpha1.Infrastructure
	g.Eventually(func(g Gomega) {
		infra = s.get(g)
		last := infra.Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Type).To(Equal(extensionsv1alpha1.LastOperationTypeReconcile))
		g.Expect(last.State).To(Equal(extensionsv1alpha1.LastOperationStateError), "last operation: %+v", last)
		for _, part := range says {
			g.Expect(last.Description).To(ContainSubstring(part))
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	return infra
}

// A state over the controller's bound (--max-state-size) is not lost: the apply fails
// naming the bound, writes neither the state nor its history, and runs nothing, so that
// nothing is created a second time.
func TestAStateOverTheBoundIsNotReplaced(t *testing.T) {
	for _, storage := range state.Storages {
		t.Run(storage.Kind(), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			var runs atomic.Int64
			s, first := recoveredShoot(t, storingIn(storage, &runs))
			objects := stateObjects(s, storage)
			stored, err := objects.ReadState(ctx, env.Client)
			g.Expect(err).NotTo(HaveOccurred())
			history, err := objects.ReadHistory(ctx, env.Client)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(history.Entries).NotTo(BeEmpty(), "a history there is to recover from")
			uids := realObjects(g, s)
			first.stop()
			before := storedObjects(g, objects)
			ran := runs.Load()

			bound := len(stored) / 2
			startControllerWith(t, s.namespace, workDir(t), env.Config, 2, storingIn(storage, &runs), boundedTo(bound))
			infra := refusedReconcile(t, s, fmt.Sprintf("the state in %s %s is not taken for lost", storage.Kind(), objects.StateName()),
				fmt.Sprintf("more than %d bytes", bound), "--max-state-size")
			g.Expect(infra.Status.LastError).NotTo(BeNil())
			g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem), "no retry helps until the bound is raised")
			g.Expect(storedObjects(g, objects)).To(Equal(before), "neither the state nor its history is written")
			g.Expect(runs.Load()).To(Equal(ran), "no run started")
			g.Expect(realObjects(g, s)).To(Equal(uids), "nothing was created again")
			after, err := objects.ReadState(ctx, env.Client)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(after).To(Equal(stored))
		})
	}
}

// A split state one of whose parts cannot be read is not lost: the apply fails
// retryably naming the part, and writes neither the state nor its history.
func TestAStatePartThatCannotBeReadIsNotReplaced(t *testing.T) {
	for _, storage := range state.Storages {
		t.Run(storage.Kind(), func(t *testing.T) {
			g := NewWithT(t)
			var runs atomic.Int64
			s, first := recoveredShoot(t, storingIn(storage, &runs))
			uids := realObjects(g, s)
			first.stop()
			objects := stateObjects(s, storage)
			part, parts := splitAndLoseAPart(g, objects)
			before := storedObjects(g, objects)
			g.Expect(before).NotTo(HaveKey(part))
			ran := runs.Load()

			startControllerWith(t, s.namespace, workDir(t), env.Config, 2, storingIn(storage, &runs))
			infra := refusedReconcile(t, s, fmt.Sprintf("the state in %s %s is not taken for lost", storage.Kind(), objects.StateName()),
				fmt.Sprintf("part %d of %d, %s %s", parts, parts, storage.Kind(), part), "not found", "read twice")
			g.Expect(infra.Status.LastError).NotTo(BeNil())
			g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorRetryableInfraDependencies), "a retry may find the part")
			g.Expect(storedObjects(g, objects)).To(Equal(before), "neither the state nor its history is written")
			g.Expect(runs.Load()).To(Equal(ran), "no run started")
			g.Expect(realObjects(g, s)).To(Equal(uids), "nothing was created again")
		})
	}
}

// splitAndLoseAPart writes the stored state again split across objects of a few hundred
// bytes, and deletes its last part. It returns that part's name and the number of parts,
// the state object counted.
func splitAndLoseAPart(g Gomega, objects state.RunObjects) (string, int) {
	ctx := context.Background()
	stored, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	split := objects.Store(env.Client)
	split.Limit = 512
	g.Expect(split.Replace(ctx, stored)).To(Succeed())
	var parts []string
	written := storedObjects(g, objects)
	for _, name := range objects.PartNames() {
		if _, ok := written[name]; ok {
			parts = append(parts, name)
		}
	}
	g.Expect(len(parts)).To(BeNumerically(">=", 2), "the state is split")
	last := objects.Storage.Object()
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: parts[len(parts)-1]}, last)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, last)).To(Succeed())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(last), objects.Storage.Object()))).To(BeTrue())
	return last.GetName(), len(parts) + 1
}

// A deletion and a rollback refuse a state one of whose parts is missing as an apply does:
// nothing is destroyed, nothing written.
func TestADeletionAndARollbackRefuseAStateWhosePartIsMissing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t)
	uids := realObjects(g, s)
	first.stop()
	objects := stateObjects(s, state.StorageConfigMap)
	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).NotTo(BeEmpty())
	part, parts := splitAndLoseAPart(g, objects)
	before := storedObjects(g, objects)

	_, err = kinds.RollbackState(ctx, env.Client, s.ref(), entries[0].Serial)
	g.Expect(err).To(MatchError(state.ErrNotReadNow))
	g.Expect(err).To(MatchError(ContainSubstring("part %d of %d, ConfigMap %s", parts, parts, part)))
	g.Expect(storedObjects(g, objects)).To(Equal(before), "the rollback wrote nothing")

	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		last := infra.Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Type).To(Equal(extensionsv1alpha1.LastOperationTypeDelete))
		g.Expect(last.State).To(Equal(extensionsv1alpha1.LastOperationStateError), "last operation: %+v", last)
		g.Expect(last.Description).To(ContainSubstring("is not taken for lost"))
		g.Expect(last.Description).To(ContainSubstring("part %d of %d, ConfigMap %s", parts, parts, part))
		g.Expect(infra.Status.LastError).NotTo(BeNil())
		g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorRetryableInfraDependencies))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	g.Expect(realObjects(g, s)).To(Equal(uids), "nothing was destroyed")
	g.Expect(storedObjects(g, objects)).To(Equal(before), "the deletion wrote nothing")
}

// A state over the bound whose history is gone is not emptied either: the resources only
// it holds that no import brings back (the zonal provider's zones) would be created a
// second time.
func TestAStateOverTheBoundWithoutHistoryCreatesNothingTwice(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredZonalShoot(t)
	stored, parsed := s.storedState(g)
	g.Expect(parsed.zoneIDs()).To(HaveLen(1))
	first.stop()
	objects := s.runObjects()
	history := objects.Storage.Object()
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: objects.HistoryName()}, history)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, history)).To(Succeed())
	before := storedObjects(g, objects)

	bound := len(stored) / 2
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, boundedTo(bound))
	refusedReconcile(t, s, fmt.Sprintf("more than %d bytes", bound))
	g.Expect(storedObjects(g, objects)).To(Equal(before), "the state is not replaced by an empty one")
	after, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(stored), "no zone was created a second time")
}
