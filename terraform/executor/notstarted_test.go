package executor

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

// fullQuota gives the namespace a ResourceQuota of one pod, counted as used: envtest runs
// no quota controller, so the test writes the usage the API server's quota admission
// checks a create against.
func fullQuota(t *testing.T, namespace string) *corev1.ResourceQuota {
	t.Helper()
	g := NewWithT(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "runs"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resourceQuantity("1")}}}
	g.Expect(env.Client.Create(context.Background(), quota)).To(Succeed())
	setQuotaStatus(t, quota, "1", "1")
	return quota
}

func setQuotaStatus(t *testing.T, quota *corev1.ResourceQuota, hard, used string) {
	t.Helper()
	patch := client.MergeFrom(quota.DeepCopy())
	quota.Spec.Hard = corev1.ResourceList{corev1.ResourcePods: resourceQuantity(hard)}
	g := NewWithT(t)
	g.Expect(env.Client.Patch(context.Background(), quota, patch)).To(Succeed())
	patch = client.MergeFrom(quota.DeepCopy())
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resourceQuantity(used)}}
	g.Expect(env.Client.Status().Patch(context.Background(), quota, patch)).To(Succeed())
}

// A run pod the API server refuses because the namespace's ResourceQuota is used up does
// not fail the run: it waits, saying why, without a run slot, and leaves no credentials
// behind. Meanwhile another run takes the one slot; once the quota has room, the waiting
// run starts by itself and succeeds.
func TestARunRefusedByAQuotaWaitsWithoutARunSlot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	retry := NotStartedRetry
	NotStartedRetry = 500 * time.Millisecond
	t.Cleanup(func() { NotStartedRetry = retry })

	quoted := newFixture(t, 1)
	quota := fullQuota(t, quoted.Namespace)
	startKubelet(quoted, false)
	e := quoted.podExecutor()

	_, err := e.Run(ctx, quoted.request(run.Apply))
	waiting, ok := notStarted(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(waiting.Reason).To(And(HavePrefix("the run pod is refused by a ResourceQuota: "), ContainSubstring("exceeded quota: runs")))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: quoted.Namespace, Name: quoted.Objects.ID.EnvSecretName()}, &corev1.Secret{}))).
		To(BeTrue(), "no credentials wait in a Secret")

	ends := &endOrder{}
	s := &Scheduler{Executor: e, MaxRuns: 1, Finished: ends.add}
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Start(running) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	g.Expect(s.Submit(ctx, quoted.request(run.Apply), run.PriorityCreate)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ticket, _ := s.Lookup(quoted.Objects.ID)
		g.Expect(ticket.Phase).To(Equal(run.PhaseWaiting))
		g.Expect(ticket.NotStarted).To(ContainSubstring("exceeded quota"))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(ends.get()).To(ContainElement(quoted.Objects.ID), "the run's object hears that it waits")

	other := newFixture(t, 1)
	startKubelet(other, false)
	g.Expect(s.Submit(ctx, other.request(run.Apply), run.PriorityReconcile)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ticket, _ := s.Lookup(other.Objects.ID)
		g.Expect(ticket.Phase).To(Equal(run.PhaseDone))
		g.Expect(ticket.Err).NotTo(HaveOccurred())
	}).WithTimeout(2*time.Minute).Should(Succeed(), "a later run of lower priority took the slot the waiting run does not hold")
	// It tries again every NotStartedRetry, holding a slot only while it tries.
	ticket, _ := s.Lookup(quoted.Objects.ID)
	g.Expect(ticket.Phase).NotTo(Equal(run.PhaseDone), "the quota is still full")
	g.Expect(ticket.NotStarted).To(ContainSubstring("exceeded quota"))

	setQuotaStatus(t, quota, "2", "1")
	g.Eventually(func(g Gomega) {
		ticket, _ := s.Lookup(quoted.Objects.ID)
		g.Expect(ticket.Phase).To(Equal(run.PhaseDone))
		g.Expect(ticket.Err).NotTo(HaveOccurred())
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	g.Expect(quoted.Items(g)).To(HaveLen(1))
}

// A run pod the scheduler finds no node for is deleted with its credentials when its run
// gives its slot back: a run pod exists only while its run holds a slot. Were the pods
// of the waiting runs left Pending, all of them would start at once when a node fits
// again, past MaxRuns. Here three runs take turns at one slot while no node fits; when
// one does, they run one after the other, never two pods at once.
func TestAnUnschedulableRunPodIsWithdrawnSoThatNoMorePodsRunThanSlots(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	retry := NotStartedRetry
	NotStartedRetry = 500 * time.Millisecond
	t.Cleanup(func() { NotStartedRetry = retry })

	node := &nodes{}
	var runs []*fixture
	for range 3 {
		f := newFixture(t, 1)
		startKubeletWith(f, kubeletOptions{nodes: node})
		runs = append(runs, f)
	}
	e := runs[0].podExecutor()
	// runPods counts the run pods and the credentials Secrets of the three runs, each kind
	// in one list: one snapshot of the API server, not one per namespace taken while the
	// runs hand the slot on.
	runPods := func(g Gomega) (pods, secrets int) {
		ours := map[string]string{}
		for _, f := range runs {
			ours[f.Namespace] = f.Objects.ID.EnvSecretName()
		}
		podList := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, podList, client.HasLabels{labelCommand})).To(Succeed())
		for _, pod := range podList.Items {
			if _, ok := ours[pod.Namespace]; ok {
				pods++
			}
		}
		secretList := &corev1.SecretList{}
		g.Expect(env.Client.List(ctx, secretList)).To(Succeed())
		for _, secret := range secretList.Items {
			if name, ok := ours[secret.Namespace]; ok && secret.Name == name {
				secrets++
			}
		}
		return pods, secrets
	}

	_, err := e.Run(ctx, runs[0].request(run.Apply))
	waiting, ok := notStarted(err)
	g.Expect(ok).To(BeTrue(), "%v", err)
	g.Expect(waiting.Reason).To(HavePrefix("the run pod is unschedulable: 0/1 nodes are available"))
	pods, secrets := runPods(g)
	g.Expect(pods).To(BeZero(), "the pod that found no node is gone with the run's start")
	g.Expect(secrets).To(BeZero(), "and so are its credentials")

	s := &Scheduler{Executor: e, MaxRuns: 1}
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Start(running) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	for _, f := range runs {
		g.Expect(s.Submit(ctx, f.request(run.Apply), run.PriorityCreate)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, f := range runs {
			ticket, _ := s.Lookup(f.Objects.ID)
			g.Expect(ticket.NotStarted).To(ContainSubstring("unschedulable"), "each run had its turn at the slot")
		}
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Consistently(func(g Gomega) {
		pods, secrets := runPods(g)
		g.Expect(pods).To(BeNumerically("<=", 1), "a run pod only for the run holding the slot")
		g.Expect(secrets).To(BeNumerically("<=", 1), "credentials only for the run holding the slot")
	}).WithTimeout(2 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	node.setFit(true)
	for _, f := range runs {
		g.Eventually(func(g Gomega) {
			ticket, _ := s.Lookup(f.Objects.ID)
			g.Expect(ticket.Phase).To(Equal(run.PhaseDone))
			g.Expect(ticket.Err).NotTo(HaveOccurred())
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		g.Expect(f.Items(g)).To(HaveLen(1))
	}
	g.Expect(node.most()).To(Equal(1), "never more run pods ran at once than the one slot")
}
