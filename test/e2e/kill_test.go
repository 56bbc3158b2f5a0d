package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tfrun "github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// chainConfig is the chain of n pairs the configuration testdata/chain is written with: a
// terraform_data "id_<i>", then a ConfigMap "item-<i>-<id>" named after its id, each pair
// after the ConfigMap of the one before, and last a ConfigMap "end", so that every
// ConfigMap's create is followed by another create. A state entry of an id lost by a
// killed run shows up as a second ConfigMap of its index.
func chainConfig(n int) string {
	var b strings.Builder
	for i := range n {
		dependsOn := ""
		if i > 0 {
			dependsOn = fmt.Sprintf("  depends_on = [kubectl_manifest.item_%d]\n", i-1)
		}
		fmt.Fprintf(&b, `resource "terraform_data" "id_%[1]d" {
%[2]s}

resource "kubectl_manifest" "item_%[1]d" {
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "item-%[1]d-${terraform_data.id_%[1]d.id}"
      namespace = var.namespace
      labels    = { "terraseed-e2e" = "item" }
    }
    data = { index = "%[1]d" }
  })
}

`, i, dependsOn)
	}
	fmt.Fprintf(&b, `resource "kubectl_manifest" "end" {
  depends_on = [kubectl_manifest.item_%d]
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata = {
      name      = "end"
      namespace = var.namespace
      labels    = { "terraseed-e2e" = "end" }
    }
  })
}
`, n-1)
	return b.String()
}

// killDelays are how long after the next create is held each kill comes, in turn: at once
// (terraform wrote the ConfigMap's entry moments before), and up to half a second later.
var killDelays = []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond}

// A run pod is killed (SIGKILL to every process of its container, as the OOM killer or a
// node's end does: nothing runs after it) right after each resource of an apply: each run
// creates one pair of the chain and is killed while the gate holds the next create, at
// once or a little later. The terraformer saves every state terraform writes as it writes
// it: the id each ConfigMap is named after was in the stored state before the kill, and
// after the last run every ConfigMap exists exactly once.
func TestRunPodKilledAfterEachResourceLosesNoStateEntry(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	gate := startGate(t, node.Config)
	const n = 12
	files := configFiles(t, "chain")
	files["chain.tf"] = chainConfig(n)
	r := newRunOf(t, files, map[string]any{"resources": n}, gate.Kubeconfig())

	lost := map[string]bool{}
	killedPods := map[types.UID]bool{}
	// Run k creates the ConfigMap of pair k; the create after it (of pair k+1, or of "end")
	// is held, and the run killed.
	for k := range n {
		gate.HoldAfter(1)
		done := r.start(tfrun.Apply)
		var pod *corev1.Pod
		g.Eventually(func(g Gomega) {
			pod = nil
			for _, p := range r.pods.seen() {
				if !killedPods[p.UID] && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
					pod = p
				}
			}
			g.Expect(pod).NotTo(BeNil(), "the run pod is running")
		}).WithTimeout(runTimeout).WithPolling(20 * time.Millisecond).Should(Succeed())
		pid, err := node.ContainerPID(t.Context(), pod.Status.ContainerStatuses[0].ContainerID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(gate.Held).WithTimeout(runTimeout).WithPolling(2 * time.Millisecond).Should(BeNumerically(">=", 1))
		held := time.Now()
		delay := killDelays[k%len(killDelays)]
		time.Sleep(delay)
		victims := descendants(pid)
		for _, victim := range victims {
			_ = syscall.Kill(victim, syscall.SIGKILL)
		}
		killedAfter := time.Since(held)
		killedPods[pod.UID] = true

		var runErr error
		g.Eventually(done).WithTimeout(runTimeout).Should(Receive(&runErr))
		g.Expect(runErr).To(MatchError(ContainSubstring("killed by signal 9")))
		// The gate drops the held create once it sees its client gone: never sent later.
		g.Eventually(gate.Held).WithTimeout(quickAction).Should(BeZero())
		// Every ConfigMap created so far is in the stored state, or at least the id it is
		// named after is: else the rerun creates it a second time.
		names, ids := r.stored(g)
		var lostNow []string
		for _, item := range items(g, r.namespace) {
			parts := strings.SplitN(item, "-", 3)
			if !slices.Contains(names, item) && !slices.Contains(ids, parts[2]) {
				lostNow = append(lostNow, item)
			}
		}
		t.Logf("run %d killed %s after the create was held (%d processes): %d ConfigMaps, %d in the stored state, lost: %v", k, killedAfter.Round(time.Millisecond), len(victims), len(items(g, r.namespace)), len(names), lostNow)
		for _, item := range lostNow {
			lost[item] = true
		}
	}

	gate.Open()
	_, err := r.run(tfrun.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(slices.Sorted(maps.Keys(lost))).To(BeEmpty(), "ConfigMaps whose id the stored state lost at a kill")
	expectOneItemPerIndex(g, items(g, r.namespace), n)
	names, _ := r.stored(g)
	g.Expect(names).To(HaveLen(n + 1))
	r.expectPodsCleanedUp(g)
}

// Stop, which an Infrastructure's deletion calls for a run under way, deletes the run pod
// with its grace period, the stop timeout: the kubelet sends the terraformer SIGTERM, which
// it relays to terraform; terraform finishes the create in flight and stops, and the
// terraformer saves the state and ends by itself. The pod is under way until then. The
// rerun creates the rest, nothing twice.
func TestRunPodStoppedSavesTheState(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := t.Context()
	gate := startGate(t, node.Config)
	const n = 8
	r := newRun(t, "items", map[string]any{"resources": n}, gate.Kubeconfig())
	r.executor.Settings.Parallelism = 1
	gate.SlowDown(time.Second)

	done := r.start(tfrun.Apply)
	g.Eventually(func(g Gomega) {
		names, _ := r.stored(g)
		g.Expect(len(names)).To(BeNumerically(">=", 2))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed(), "the run is under way")
	g.Expect(r.executor.Stop(ctx, r.objects.ID)).To(Succeed())
	stopping := &corev1.Pod{}
	g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: r.objects.ID.PodName()}, stopping)).To(Succeed())
	g.Expect(stopping.DeletionTimestamp).NotTo(BeNil())
	g.Expect(stopping.DeletionGracePeriodSeconds).To(HaveValue(BeEquivalentTo((r.executor.Settings.StopTimeout + terraformer.DefaultFinalSaveTimeout + 10*time.Second).Seconds())),
		"deleted with the pod's grace period: the stop timeout, the final save and a margin")
	active, err := r.executor.Active(ctx, r.objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeTrue(), "the run is under way while its pod stops")

	g.Eventually(done).WithTimeout(runTimeout).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("interrupted; the state was saved")), "the terraformer's own message")
	terminated := r.pods.seen()[0].Status.ContainerStatuses[0].State.Terminated
	g.Expect(terminated).NotTo(BeNil())
	g.Expect(terminated.ExitCode).To(BeEquivalentTo(1), "the terraformer ended by itself, not killed")
	active, err = r.executor.Active(ctx, r.objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeFalse())
	// The kubectl provider gives up on the create in flight when terraform stops it (see
	// the executor's SIGTERM test): that ConfigMap may exist without its entry, but the id
	// it is named after is in the stored state, so that the rerun applies it again.
	created := items(g, r.namespace)
	names, _ := r.stored(g)
	t.Logf("%d of %d created before the stop, %d in the stored state", len(created), n, len(names))
	g.Expect(created).To(ContainElements(names))
	g.Expect(len(created)-len(names)).To(BeNumerically("<=", 1), "at most the create in flight is missing")
	r.expectEveryItemInState(g)

	gate.SlowDown(0)
	rerun(g, r)
	expectOneItemPerIndex(g, items(g, r.namespace), n)
	r.expectPodsCleanedUp(g)
}

// A run stopped while a create hangs (a cloud API that does not answer) does not stop by
// itself: terraform waits for the create. The terraformer kills it when the stop timeout
// ends, before the pod's grace period does, and saves the state: the run ends by itself,
// saying so, what terraform recorded before is in the stored state, and the rerun creates
// the rest, nothing twice.
func TestRunPodStoppedWhileACreateHangsLosesNothing(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := t.Context()
	gate := startGate(t, node.Config)
	const n, before = 8, 3
	r := newRun(t, "items", map[string]any{"resources": n}, gate.Kubeconfig())
	r.executor.Settings.Parallelism = 1
	r.executor.Settings.StopTimeout = 15 * time.Second

	gate.HoldAfter(before)
	done := r.start(tfrun.Apply)
	g.Eventually(gate.Held).WithTimeout(runTimeout).WithPolling(pollEvery).Should(BeNumerically(">=", 1), "a create hangs")
	g.Expect(r.executor.Stop(ctx, r.objects.ID)).To(Succeed())
	stopped := time.Now()

	var err error
	g.Eventually(done).WithTimeout(runTimeout).Should(Receive(&err))
	t.Logf("the run ended %s after the stop: %v", time.Since(stopped).Round(time.Second), err)
	g.Expect(err).To(MatchError(ContainSubstring("interrupted; the state was saved")), "the terraformer stopped terraform at the end of the stop timeout and saved the state")
	g.Expect(err).NotTo(MatchError(ContainSubstring("killed by signal")), "the pod was not killed at the end of its grace period")
	g.Expect(time.Since(stopped)).To(BeNumerically(">=", r.executor.Settings.StopTimeout))
	names, _ := r.stored(g)
	g.Expect(names).To(HaveLen(before), "every create that completed is in the stored state")
	r.expectEveryItemInState(g)

	gate.Open()
	rerun(g, r)
	expectOneItemPerIndex(g, items(g, r.namespace), n)
	r.expectPodsCleanedUp(g)
}

// rerun applies again once the stopped pod is gone: until then its run is under way.
func rerun(g Gomega, r *run) {
	g.Eventually(func() error {
		_, err := r.run(tfrun.Apply)
		return err
	}).WithTimeout(runTimeout).WithPolling(time.Second).ShouldNot(HaveOccurred())
}
