package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/executor"
	tfrun "github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/test/realnode"
)

// A run pod whose nodeSelector no node matches is left Pending by the scheduler: the run
// waits, saying so, holding no run slot, and another run takes the one slot meanwhile.
// Once a node matches, the scheduler places the pod, the waiting run adopts it, and it
// applies.
func TestAnUnschedulableRunPodWaitsWithoutARunSlot(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := context.Background()
	retry := executor.NotStartedRetry
	executor.NotStartedRetry = 2 * time.Second
	t.Cleanup(func() { executor.NotStartedRetry = retry })
	const label = "terraseed-e2e/pool"
	t.Cleanup(func() { labelNode(t, label, nil) })

	pending := newRun(t, "items", map[string]any{"resources": 2}, adminKubeconfig(t))
	pending.executor.Placement = executor.Placement{NodeSelector: map[string]string{label: "runs"}}
	other := newRun(t, "items", map[string]any{"resources": 1}, adminKubeconfig(t))

	s := &executor.Scheduler{Executor: byNamespace{pending.namespace: pending.executor, other.namespace: other.executor}, MaxRuns: 1}
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Start(running) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	g.Expect(s.Submit(ctx, pending.request(tfrun.Apply), tfrun.PriorityCreate)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ticket, _ := s.Lookup(pending.objects.ID)
		g.Expect(ticket.Phase).To(Equal(tfrun.PhaseWaiting))
		g.Expect(ticket.NotStarted).To(And(HavePrefix("the run pod is unschedulable: "), ContainSubstring("node(s) didn't match Pod's node affinity/selector")))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
	pod := &corev1.Pod{}
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: pending.namespace, Name: pending.objects.ID.PodName()}, pod)).To(Succeed())
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending), "the pod stays, to be placed when a node matches")

	g.Expect(s.Submit(ctx, other.request(tfrun.Apply), tfrun.PriorityReconcile)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ticket, _ := s.Lookup(other.objects.ID)
		g.Expect(ticket.Phase).To(Equal(tfrun.PhaseDone))
		g.Expect(ticket.Err).NotTo(HaveOccurred())
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed(), "the later run took the slot the pending one does not hold")
	// It looks at its pod again every NotStartedRetry, holding a slot only while it looks.
	ticket, _ := s.Lookup(pending.objects.ID)
	g.Expect(ticket.Phase).NotTo(Equal(tfrun.PhaseDone))
	g.Expect(ticket.NotStarted).To(ContainSubstring("unschedulable"))

	labelNode(t, label, map[string]string{label: "runs"})
	g.Eventually(func(g Gomega) {
		ticket, _ := s.Lookup(pending.objects.ID)
		g.Expect(ticket.Phase).To(Equal(tfrun.PhaseDone))
		g.Expect(ticket.Err).NotTo(HaveOccurred())
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
	g.Expect(items(g, pending.namespace)).To(HaveLen(2))
	g.Expect(pending.pods.seen()).To(HaveLen(1), "the pending pod itself ran: adopted, not replaced")
	pending.expectPodsCleanedUp(g)
}

// labelNode sets the node's label key to labels[key], or removes it when labels has none.
func labelNode(t *testing.T, key string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{}
	g := NewWithT(t)
	g.Expect(kube.Get(context.Background(), client.ObjectKey{Name: realnode.NodeName}, n)).To(Succeed())
	patch := client.MergeFrom(n.DeepCopy())
	if v, ok := labels[key]; ok {
		n.Labels[key] = v
	} else {
		delete(n.Labels, key)
	}
	g.Expect(kube.Patch(context.Background(), n, patch)).To(Succeed())
}

// byNamespace runs each namespace's runs with its own executor: one scheduler's slots
// for runs placed differently.
type byNamespace map[string]*executor.PodExecutor

func (b byNamespace) Run(ctx context.Context, req tfrun.Request) (*tfrun.Result, error) {
	return b[req.ID.Namespace].Run(ctx, req)
}

func (b byNamespace) Stop(ctx context.Context, id tfrun.ID) error {
	return b[id.Namespace].Stop(ctx, id)
}
