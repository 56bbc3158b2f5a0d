package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/executor"
	tfrun "github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/test/realnode"
)

// Run pods whose nodeSelector no node matches are left Pending by the scheduler: their
// runs wait, saying so, holding no run slot, and another run takes the one slot
// meanwhile. A waiting run leaves no pod behind: its pod is deleted with its credentials
// as it gives the slot back, and created again at its next try. Once a node matches, the
// waiting runs apply one after the other: never more run pods on the node, nor on the API
// server at all, than the one slot, where pods left Pending would all start at once.
func TestUnschedulableRunPodsWaitWithoutASlotAndNeverRunPastTheSlots(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := context.Background()
	retry := executor.NotStartedRetry
	executor.NotStartedRetry = 2 * time.Second
	t.Cleanup(func() { executor.NotStartedRetry = retry })
	const label = "terraseed-e2e/pool"
	t.Cleanup(func() { labelNode(t, label, nil) })

	executors := byNamespace{}
	var pending []*run
	for range 3 {
		r := newRun(t, "items", map[string]any{"resources": 2}, adminKubeconfig(t))
		r.executor.Placement = executor.Placement{NodeSelector: map[string]string{label: "runs"}}
		executors[r.namespace] = r.executor
		pending = append(pending, r)
	}
	other := newRun(t, "items", map[string]any{"resources": 1}, adminKubeconfig(t))
	executors[other.namespace] = other.executor
	pods := watchRunPods(t, executors)

	s := &executor.Scheduler{Executor: executors, MaxRuns: 1}
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Start(running) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	for _, r := range pending {
		g.Expect(s.Submit(ctx, r.request(tfrun.Apply), tfrun.PriorityCreate)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, r := range pending {
			ticket, _ := s.Lookup(r.objects.ID)
			g.Expect(ticket.NotStarted).To(And(HavePrefix("the run pod is unschedulable: "), ContainSubstring("node(s) didn't match Pod's node affinity/selector")))
		}
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed(), "each run had its turn at the slot")

	g.Expect(s.Submit(ctx, other.request(tfrun.Apply), tfrun.PriorityReconcile)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ticket, _ := s.Lookup(other.objects.ID)
		g.Expect(ticket.Phase).To(Equal(tfrun.PhaseDone))
		g.Expect(ticket.Err).NotTo(HaveOccurred())
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed(), "the later run took the slot the pending ones do not hold")
	// They look at their pods again every NotStartedRetry, holding the slot only while they look.
	for _, r := range pending {
		ticket, _ := s.Lookup(r.objects.ID)
		g.Expect(ticket.Phase).NotTo(Equal(tfrun.PhaseDone))
	}

	labelNode(t, label, map[string]string{label: "runs"})
	for _, r := range pending {
		g.Eventually(func(g Gomega) {
			ticket, _ := s.Lookup(r.objects.ID)
			g.Expect(ticket.Phase).To(Equal(tfrun.PhaseDone))
			g.Expect(ticket.Err).NotTo(HaveOccurred())
		}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
		g.Expect(items(g, r.namespace)).To(HaveLen(2))
		r.expectPodsCleanedUp(g)
	}
	onNode, present := pods.most()
	g.Expect(onNode).To(Equal(1), "never more run pods on the node at once than the one slot")
	g.Expect(present).To(Equal(1), "never more run pods at all than the one slot: a waiting run holds none")
}

// runPodCount follows the run pods of some namespaces in one watch, in the API server's
// order, and keeps the most that were on the node at once (bound to it, their container
// not ended) and the most that existed at once.
type runPodCount struct {
	mu                      sync.Mutex
	onNode, present         map[types.UID]bool
	mostOnNode, mostPresent int
}

func watchRunPods(t *testing.T, namespaces byNamespace) *runPodCount {
	t.Helper()
	c := &runPodCount{onNode: map[types.UID]bool{}, present: map[types.UID]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := clientset.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: tfrun.LabelPrefix + "command"})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for event := range w.ResultChan() {
			pod, ok := event.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if _, ours := namespaces[pod.Namespace]; !ours {
				continue
			}
			c.mu.Lock()
			ended := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
			for _, status := range pod.Status.ContainerStatuses {
				ended = ended || status.State.Terminated != nil
			}
			c.present[pod.UID] = event.Type != watch.Deleted
			c.onNode[pod.UID] = event.Type != watch.Deleted && pod.Spec.NodeName != "" && !ended
			c.mostOnNode = max(c.mostOnNode, count(c.onNode))
			c.mostPresent = max(c.mostPresent, count(c.present))
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return c
}

func (c *runPodCount) most() (onNode, present int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mostOnNode, c.mostPresent
}

func count(set map[types.UID]bool) int {
	n := 0
	for _, in := range set {
		if in {
			n++
		}
	}
	return n
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
