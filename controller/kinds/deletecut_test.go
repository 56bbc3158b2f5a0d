package kinds_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
)

// cleanFailingOnce is the local executor whose first removal of a run directory fails,
// as a deletion is cut short once the run objects are gone (the controller killed).
type cleanFailingOnce struct {
	*executor.LocalExecutor
	failed atomic.Bool
}

func (e *cleanFailingOnce) Clean(ctx context.Context, id run.ID) error {
	if e.failed.CompareAndSwap(false, true) {
		return errors.New("the run directory is not removed this time")
	}
	return e.LocalExecutor.Clean(ctx, id)
}

// A deletion cut short after its destroy succeeded and its run objects, the state among
// them, were deleted, finds nothing to destroy on its retry and ends: not a lost state
// whose index names the destroyed resources, which would stop it for good.
func TestDeletionCutShortAfterItsDestroyEndsOnItsRetry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	var cut *cleanFailingOnce
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(setup *controllerSetup) {
		cut = &cleanFailingOnce{LocalExecutor: setup.Executor.(*executor.LocalExecutor)}
		setup.Executor = cut
	})
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	g.Expect(env.Client.Delete(ctx, s.infra)).To(Succeed())
	s.waitGone(t)
	g.Expect(cut.failed.Load()).To(BeTrue(), "the first deletion was cut short after the run objects went")
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, s.runObjects().StateName()), &corev1.ConfigMap{})).NotTo(Succeed())
}
