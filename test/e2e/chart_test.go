package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/test/testenv"
)

const (
	leaseName = "terraseed-infrastructure-controller"
	infraName = "infrastructure"
	runPod    = infraName + ".infra.tf-run"
)

// controllerPods returns the chart's controller pods that are not being deleted.
func controllerPods(g Gomega) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(kube.List(context.Background(), list, client.InNamespace(releaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": "terraseed", "app.kubernetes.io/instance": releaseName})).To(Succeed())
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitControllerAvailable waits until the Deployment's replicas all run, ready.
func waitControllerAvailable(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(kube.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: releaseName}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		pods = controllerPods(g)
		g.Expect(pods).To(HaveLen(int(*d.Spec.Replicas)))
		for i := range pods {
			g.Expect(podReady(&pods[i])).To(BeTrue(), "pod %s ready", pods[i].Name)
		}
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
	return pods
}

// leader returns the name of the controller pod holding the leader election lease.
func leader(g Gomega) string {
	lease := &coordinationv1.Lease{}
	g.Expect(kube.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: leaseName}, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	// controller-runtime's identity: <hostname, the pod's name>_<uuid>.
	name, _, ok := strings.Cut(*lease.Spec.HolderIdentity, "_")
	g.Expect(ok).To(BeTrue(), "holder %s", *lease.Spec.HolderIdentity)
	return name
}

func podLogs(g Gomega, namespace, name string) string {
	logs, err := clientset.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	return string(logs)
}

// previousRun tells how a restarted container's previous run ended and what it printed last.
func previousRun(p corev1.Pod) string {
	status := p.Status.ContainerStatuses[0]
	if status.RestartCount == 0 {
		return ""
	}
	logs, err := clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Previous: true, TailLines: ptrTo(int64(40))}).DoRaw(context.Background())
	if err != nil {
		logs = []byte(err.Error())
	}
	return fmt.Sprintf("last state %+v; the previous run's log:\n%s", status.LastTerminationState, logs)
}

func ptrTo[T any](v T) *T { return &v }

// The chart's controller runs in pods of the assembled image: two replicas, one of them
// the elected leader, ready by their probes, running as the unprivileged user on a
// read-only root file system with the image's terraform configuration.
func TestChartControllerRunsInPods(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	pods := waitControllerAvailable(t)
	g.Expect(pods).To(HaveLen(2))
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		g.Expect(p.Spec.Containers[0].Image).To(Equal(ImageName))
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "the liveness probe never failed: %s", previousRun(p))
		expectHardened(t, p.Status.ContainerStatuses[0].ContainerID, true)
		pid, err := node.ContainerPID(context.Background(), p.Status.ContainerStatuses[0].ContainerID)
		g.Expect(err).NotTo(HaveOccurred())
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Split(string(environ), "\x00")).To(ContainElements(
			"TF_CLI_CONFIG_FILE=/etc/terraseed/terraformrc", "TERRASEED_PROVIDER_MIRROR=/opt/terraseed/plugins", "TERRASEED_LOG_LEVEL=debug"))
	}
	var holder string
	g.Eventually(func(g Gomega) { holder = leader(g) }).WithTimeout(quickAction).Should(Succeed())
	g.Expect(names).To(ContainElement(holder))
	g.Eventually(func(g Gomega) {
		g.Expect(podLogs(g, releaseNamespace, holder)).To(ContainSubstring("servingProviderTypes"))
	}).WithTimeout(quickAction).Should(Succeed())

	// Ready means the control-plane webhook serves: the pods generated its certificate
	// into the chart's Secret and its CA into the chart's webhook configuration.
	secret := &corev1.Secret{}
	g.Expect(kube.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: "terraseed-webhook-cert"}, secret)).To(Succeed())
	g.Expect(secret.Data).To(HaveKey("tls.crt"))
	config := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(kube.Get(context.Background(), client.ObjectKey{Name: "terraseed-controlplane"}, config)).To(Succeed())
	g.Expect(config.Webhooks).To(HaveLen(2), "aws and local")
	for _, hook := range config.Webhooks {
		g.Expect(hook.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]), hook.Name)
		g.Expect(hook.ClientConfig.Service.Name).To(Equal("terraseed-webhook"))
	}
}

// shoot is an Infrastructure of type local in a namespace of its own, with the
// credentials Secret whose kubeconfig terraform uses.
type shoot struct {
	namespace string
	infra     *extensionsv1alpha1.Infrastructure
	pods      *podLog
}

func newShoot(t *testing.T, kubeconfig []byte, zones ...string) *shoot {
	t.Helper()
	ns := namespace(t)
	s := &shoot{namespace: ns, pods: watchPods(t, ns), infra: &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infraName},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec:  extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: testenv.LocalProviderConfig(zones...)},
			Region:       "local-1",
			SecretRef:    corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
			SSHPublicKey: []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3Q terraseed@e2e"),
		},
	}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"}, Data: map[string][]byte{"kubeconfig": kubeconfig}}
	NewWithT(t).Expect(kube.Create(context.Background(), secret)).To(Succeed())
	return s
}

// create creates the Infrastructure; when the test ends, it is deleted and waited for.
func (s *shoot) create(t *testing.T, before ...func()) {
	t.Helper()
	NewWithT(t).Expect(kube.Create(context.Background(), s.infra)).To(Succeed())
	t.Cleanup(func() {
		for _, f := range before {
			f()
		}
		if err := kube.Delete(context.Background(), s.infra); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the Infrastructure: %v", err)
			return
		}
		s.waitGone(t)
	})
}

func (s *shoot) get(g Gomega) *extensionsv1alpha1.Infrastructure {
	infra := &extensionsv1alpha1.Infrastructure{}
	g.Expect(kube.Get(context.Background(), client.ObjectKeyFromObject(s.infra), infra)).To(Succeed())
	return infra
}

// waitFor waits until the current generation's last operation of the type succeeded.
func (s *shoot) waitSucceeded(t *testing.T, opType extensionsv1alpha1.LastOperationType) *extensionsv1alpha1.Infrastructure {
	t.Helper()
	var infra *extensionsv1alpha1.Infrastructure
	NewWithT(t).Eventually(func(g Gomega) {
		infra = s.get(g)
		g.Expect(infra.Status.ObservedGeneration).To(Equal(infra.Generation))
		g.Expect(infra.Status.LastOperation).NotTo(BeNil())
		g.Expect(infra.Status.LastOperation.Type).To(Equal(opType), "last operation: %+v, last error: %+v", infra.Status.LastOperation, infra.Status.LastError)
		g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "last operation: %+v, last error: %+v", infra.Status.LastOperation, infra.Status.LastError)
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
	return infra
}

func (s *shoot) waitGone(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKeyFromObject(s.infra), &extensionsv1alpha1.Infrastructure{}))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(BeTrue(), "the Infrastructure is deleted")
}

// target is the namespace the local provider creates for the shoot.
func (s *shoot) target() string { return s.namespace + "--" + infraName }

func (s *shoot) networkPolicies(g Gomega) []string {
	list := &networkingv1.NetworkPolicyList{}
	g.Expect(kube.List(context.Background(), list, client.InNamespace(s.target()))).To(Succeed())
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// runPods returns the run pods that got a node, in order. A run pod the scheduler found
// no node for ran nothing: its run withdraws it and creates it again once it holds a slot.
func (s *shoot) runPods() []*corev1.Pod {
	var pods []*corev1.Pod
	for _, p := range s.pods.seen() {
		if p.Name == runPod && p.Spec.NodeName != "" {
			pods = append(pods, p)
		}
	}
	return pods
}

// summaries says of each pod what a failed count needs: its command, node, phase and exit.
func summaries(pods []*corev1.Pod) []string {
	var lines []string
	for _, p := range pods {
		exit := "-"
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Terminated != nil {
				exit = fmt.Sprintf("%d %s", c.State.Terminated.ExitCode, c.State.Terminated.Reason)
			}
		}
		lines = append(lines, fmt.Sprintf("%s command=%s node=%q phase=%s exit=%s created=%s deleted=%v", p.UID, p.Labels["terraseed.gardener.cloud/command"], p.Spec.NodeName, p.Status.Phase, exit, p.CreationTimestamp.Format(time.RFC3339), p.DeletionTimestamp != nil))
	}
	return lines
}

// The controller the chart installed creates, changes and deletes an Infrastructure of
// type local through terraformer pods on the node.
func TestInfrastructureLifecycleThroughRunPods(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	s := newShoot(t, adminKubeconfig(t), "10.250.0.0/19")
	s.create(t)

	infra := s.waitSucceeded(t, extensionsv1alpha1.LastOperationTypeCreate)
	g.Expect(string(infra.Status.ProviderStatus.Raw)).To(ContainSubstring(`"namespace":"` + s.target() + `"`))
	g.Expect(s.networkPolicies(g)).To(ConsistOf("deny-all", "zone-0"))
	pods := s.runPods()
	g.Expect(pods).To(HaveLen(1), "one run pod for the create")
	g.Expect(pods[0].Spec.ServiceAccountName).To(Equal(terraformerAccount))
	g.Expect(pods[0].Spec.Containers[0].Image).To(Equal(ImageName), "the controller's image")
	g.Expect(pods[0].Labels).To(HaveKeyWithValue("networking.gardener.cloud/to-public-networks", "allowed"), "the chart's terraformer pod labels")
	// The run ends when its terraformer said it succeeded, or the kubelet reported that
	// its container exited; the pod is deleted before the kubelet reported the phase.
	g.Expect(pods[0].Status.ContainerStatuses).To(succeededOrUnreported, "the run pod's container succeeded")

	// A second zone: the controller reconciles the change.
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		current.Spec.ProviderConfig = testenv.LocalProviderConfig("10.250.0.0/19", "10.250.32.0/19")
		g.Expect(kube.Update(context.Background(), current)).To(Succeed())
	}).WithTimeout(quickAction).Should(Succeed())
	s.waitSucceeded(t, extensionsv1alpha1.LastOperationTypeReconcile)
	g.Expect(s.networkPolicies(g)).To(ConsistOf("deny-all", "zone-0", "zone-1"))
	g.Expect(summaries(s.runPods())).To(HaveLen(2))

	g.Expect(kube.Delete(context.Background(), s.infra)).To(Succeed())
	s.waitGone(t)
	g.Expect(summaries(s.runPods())).To(HaveLen(3), "create, change, delete")
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{}
		err := kube.Get(context.Background(), client.ObjectKey{Name: s.target()}, ns)
		g.Expect(apierrors.IsNotFound(err) || ns.DeletionTimestamp != nil).To(BeTrue(), "the shoot's namespace is deleted")
	}).WithTimeout(quickAction).Should(Succeed())
	for _, name := range []string{infraName + ".infra.tf-config", infraName + ".infra.tf-state"} {
		g.Expect(apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKey{Namespace: s.namespace, Name: name}, &corev1.ConfigMap{}))).To(BeTrue(), name)
	}
}

// The leading controller pod is deleted while its run pod applies: the other replica
// takes the lease, adopts the run pod instead of starting a second one, and the run
// completes.
func TestControllerPodDeletedMidRun(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	waitControllerAvailable(t)
	gate := startGate(t, node.Config)
	s := newShoot(t, gate.Kubeconfig(), "10.250.0.0/19")
	gate.HoldAfter(0)
	s.create(t, gate.Open)

	g.Eventually(gate.Held).WithTimeout(runTimeout).WithPolling(pollEvery).Should(BeNumerically(">=", 1), "the run pod's first create is held")
	pod := s.pods.running(t, runPod)
	// The controller requests the run pod's token: the pod mounts no volume, and writes
	// in its own layer, of which only /tmp is the run's.
	g.Expect(pod.Spec.Volumes).To(BeEmpty())
	g.Expect(pod.Spec.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
	expectHardened(t, pod.Status.ContainerStatuses[0].ContainerID, false)
	var old string
	g.Eventually(func(g Gomega) { old = leader(g) }).WithTimeout(quickAction).Should(Succeed())
	g.Expect(podLogs(g, releaseNamespace, old)).To(ContainSubstring("runPodCreated"), "the leader started the run")
	g.Expect(kube.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNamespace, Name: old}})).To(Succeed())

	var next string
	g.Eventually(func(g Gomega) {
		next = leader(g)
		g.Expect(next).NotTo(Equal(old))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed(), "another replica leads")
	g.Eventually(func(g Gomega) {
		g.Expect(podLogs(g, releaseNamespace, next)).To(ContainSubstring("adoptingRunPod"))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed(), "the new leader adopts the run pod")

	gate.Open()
	s.waitSucceeded(t, extensionsv1alpha1.LastOperationTypeCreate)
	pods := s.runPods()
	g.Expect(pods).To(HaveLen(1), "no second run")
	g.Expect(pods[0].UID).To(Equal(pod.UID))
	g.Expect(s.networkPolicies(g)).To(ConsistOf("deny-all", "zone-0"))
	waitControllerAvailable(t)
}

// Deleting an Infrastructure whose first apply is under way in a run pod, before it saved
// any state, waits for the run pod (an interrupted create may leave a resource its
// provider never reported), then destroys what the state holds: nothing of the shoot stays
// behind, and nothing is written for it once it is gone.
func TestDeletionDuringARunPodsFirstApplyWaitsForItThenDestroys(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	waitControllerAvailable(t)
	gate := startGate(t, node.Config)
	s := newShoot(t, gate.Kubeconfig(), "10.250.0.0/19")
	t.Cleanup(func() {
		if t.Failed() {
			g := NewWithT(t)
			t.Logf("the leader's log:\n%s", podLogs(g, releaseNamespace, leader(g)))
		}
	})
	// Every create takes 3 s: the apply is under way for a while before its first is done.
	gate.SlowDown(3 * time.Second)
	s.create(t)
	s.pods.running(t, runPod)
	g.Expect(gate.Creates()).To(BeZero(), "the apply created nothing yet")

	g.Expect(kube.Delete(context.Background(), s.get(g))).To(Succeed())
	s.waitGone(t)

	pods := s.runPods()
	g.Expect(pods).To(HaveLen(2), "the apply, then the destroy")
	g.Expect(pods[0].Status.ContainerStatuses).To(succeededOrUnreported, "the deletion waited for the apply to succeed")
	g.Expect(gate.Creates()).To(BeNumerically(">=", 3), "the apply created the namespace and its policies")
	g.Expect(s.networkPolicies(g)).To(BeEmpty(), "what the apply created was destroyed")
	ns := &corev1.Namespace{}
	err := kube.Get(context.Background(), client.ObjectKey{Name: s.target()}, ns)
	g.Expect(apierrors.IsNotFound(err) || ns.DeletionTimestamp != nil).To(BeTrue(), "the shoot's namespace is deleted")
	g.Consistently(func(g Gomega) {
		for _, name := range []string{infraName + ".infra.tf-config", infraName + ".infra.tf-state"} {
			g.Expect(apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKey{Namespace: s.namespace, Name: name}, &corev1.ConfigMap{}))).To(BeTrue(), name)
		}
		g.Expect(apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKey{Namespace: s.namespace, Name: runPod}, &corev1.Pod{}))).To(BeTrue(), "no run pod")
	}).WithTimeout(10*time.Second).WithPolling(pollEvery).Should(Succeed(), "nothing is written for the Infrastructure once it is gone")
}
