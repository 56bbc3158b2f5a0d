package executor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/terraseed/terraseed/terraform/run"
)

// The leader's timings in these tests: a lost lease shows within seconds.
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 3 * time.Second
	testRetryPeriod   = 250 * time.Millisecond
)

// replica is one controller process's leader election and local runs, started and
// drained as cmd/terraseed starts and drains the controller.
type replica struct {
	mu sync.Mutex
	// runStarted is when the replica's run got past the hold; runEnded when it wrote its
	// last output line, the final save done and the run still counted by the executor
	// (its caller learns of the end only later, after the drain may have seen it);
	// stopped when the process would exit.
	runStarted, runEnded, stopped time.Time
	runErr, err                   error
	done                          chan struct{}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// runError is what the replica's Run returned, once it returned.
func (r *replica) runError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runErr
}

func (r *replica) times() (runStarted, runEnded, stopped time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runStarted, r.runEnded, r.stopped
}

// startReplica starts a manager whose leader election uses the Lease name of namespace
// as identity, and which, once leading, runs req with e.
func startReplica(ctx context.Context, t *testing.T, identity, namespace, name string, e *LocalExecutor, bound time.Duration, req run.Request) *replica {
	g := NewWithT(t)
	clientset, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, clientset.CoreV1(), clientset.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	g.Expect(err).NotTo(HaveOccurred())
	mgr, err := manager.New(env.Config, manager.Options{
		LeaderElection:                      true,
		LeaderElectionResourceLockInterface: HoldAfterTakeover(lock, bound, e.HoldRunsUntil),
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       ptr.To(testLeaseDuration),
		RenewDeadline:                       ptr.To(testRenewDeadline),
		RetryPeriod:                         ptr.To(testRetryPeriod),
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
		GracefulShutdownTimeout:             ptr.To(bound),
	})
	g.Expect(err).NotTo(HaveOccurred())
	r := &replica{done: make(chan struct{})}
	// The run's own log says when it got past the hold.
	logger := funcr.NewJSON(func(obj string) {
		if strings.Contains(obj, `"msg":"runStarting"`) {
			r.mu.Lock()
			r.runStarted = time.Now()
			r.mu.Unlock()
		}
	}, funcr.Options{Verbosity: 1})
	output := e.Output
	e.Output = writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "run failed:") {
			r.mu.Lock()
			r.runEnded = time.Now()
			r.mu.Unlock()
		}
		return output.Write(p)
	})
	g.Expect(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		_, err := e.Run(logf.IntoContext(ctx, logger), req)
		r.mu.Lock()
		r.runErr = err
		if err == nil {
			r.runEnded = time.Now()
		}
		r.mu.Unlock()
		return nil
	}))).To(Succeed())
	go func() {
		defer close(r.done)
		err := StartAndDrain(ctx, mgr, e, bound)
		r.mu.Lock()
		r.stopped, r.err = time.Now(), err
		r.mu.Unlock()
	}()
	return r
}

// A leader that loses its lease while an apply runs (another replica takes the Lease
// over) stops terraform and saves the state before it exits, bounded by the stop and
// final-save bound, though controller-runtime skips the graceful shutdown then. The
// replica that takes the lease over starts no run of the object before the lease it took
// had been expired for that bound: the old run, on another machine, may still be saving.
func TestALeaderThatLosesItsLeaseSavesTheStateBeforeTheNextLeaderRuns(t *testing.T) {
	g := NewWithT(t)
	f, gate := heldApply(t)
	f.executor.Settings.StopTimeout = 20 * time.Second
	// The old leader's stop and final save take seconds here; the test's bound.
	bound := 20 * time.Second
	next := &LocalExecutor{Client: env.Client, Settings: f.executor.Settings, BaseDir: t.TempDir(), Output: f.Output}
	const lease = "terraseed-infrastructure-controller"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	old := startReplica(ctx, t, "old", f.Namespace, lease, f.executor, bound, f.request(run.Apply))
	gate.WaitUntilReached()
	replacement := startReplica(ctx, t, "replacement", f.Namespace, lease, next, bound, f.request(run.Apply))

	// Another identity takes the Lease over, as a replica does once the leader's renewals
	// stop reaching the API server.
	leases := kubernetes.NewForConfigOrDie(env.Config).CoordinationV1().Leases(f.Namespace)
	var takenOver time.Time
	g.Eventually(func() error {
		l, err := leases.Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			return err
		}
		takenOver = time.Now()
		now := metav1.NewMicroTime(takenOver)
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("intruder"), LeaseDurationSeconds: ptr.To(int32(testLeaseDuration / time.Second)),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	}).Should(Succeed())

	g.Eventually(old.done).WithTimeout(bound + testRenewDeadline + 10*time.Second).Should(BeClosed())
	_, runEnded, stopped := old.times()
	g.Expect(old.err).To(MatchError(ContainSubstring("leader election lost")))
	g.Expect(runEnded).NotTo(BeZero(), "the old leader exited with its run under way, before the final save")
	g.Expect(runEnded).To(BeTemporally("<=", stopped))
	// The run's caller learns of its end after the drain may have seen it.
	g.Eventually(old.runError).Should(MatchError(ContainSubstring("interrupted; the state was saved")))
	created, _ := f.ExpectNoLostStateEntry(g)
	g.Expect(created).To(Equal(2), "the old run got to its gate")

	// The replacement is held until the intruder's lease had been expired for the bound.
	gate.Open()
	g.Eventually(func() time.Time { started, _, _ := replacement.times(); return started }).
		WithTimeout(bound + testLeaseDuration + time.Minute).ShouldNot(BeZero())
	started, _, _ := replacement.times()
	g.Expect(started).To(BeTemporally(">", runEnded), "the new leader's run started before the old run's final save ended")
	g.Expect(started).To(BeTemporally(">=", takenOver.Add(testLeaseDuration+bound).Add(-time.Second)), "the new leader did not wait for the old lease to be expired for the bound")
	g.Eventually(func() time.Time { _, ended, _ := replacement.times(); return ended }).WithTimeout(2 * time.Minute).ShouldNot(BeZero())
	g.Expect(replacement.runError()).NotTo(HaveOccurred())
	f.ExpectEachItemOnceInState(g, 2)

	cancel()
	g.Eventually(replacement.done).WithTimeout(bound + 10*time.Second).Should(BeClosed())
}
