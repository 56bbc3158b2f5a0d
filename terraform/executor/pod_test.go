package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/terraformer"
	"github.com/terraseed/terraseed/test/testenv"
)

// kubelet plays the kubelet's part for the run pods of one namespace, which envtest has
// no node for: it runs a pod's command as a process of this machine (the terraformer is
// this test binary) and writes the pod's status back, honouring activeDeadlineSeconds
// and deletion as the kubelet does.
type kubelet struct {
	f *fixture
	kubeletOptions

	mu      sync.Mutex
	started []*corev1.Pod
	running map[types.UID]*exec.Cmd
	// stopped holds the grace period of each pod whose deletion stopped its process, by name.
	stopped map[string]int64
	// logs hold each pod's output, by name, served to the API server when serveLogs is set.
	logs map[string]*testenv.SyncBuffer
	// secrets hold what each started pod's credentials Secret held, by the pod's name.
	secrets map[string]map[string][]byte
}

type kubeletOptions struct {
	// paused leaves pods pending.
	paused bool
	// serveLogs registers a Node for this kubelet and binds the pods to it, so that the
	// API server fetches their logs from it as from a real kubelet.
	serveLogs bool
	// loseTerminationMessages reports no termination message, as for a container killed
	// before it wrote one.
	loseTerminationMessages bool
	// asServiceAccount runs the terraformer with the rights of the pod's ServiceAccount,
	// as a kubelet's pod has them, instead of the test's admin rights.
	asServiceAccount bool
	// unreportedExits never reports that a container ended by itself, as a kubelet that
	// has yet to see it: the pod stays Running until it is deleted.
	unreportedExits bool
	// nodes, when set, plays the scheduler's part too: while no node fits, it marks each
	// pod unschedulable as the scheduler does and starts none; once one does, it puts each
	// pod on it (a change of the pod, as the scheduler's binding is) before it starts it,
	// and counts the pods running at once.
	nodes *nodes
}

// nodes is whether a node fits the run pods, shared by the kubelets of several
// namespaces, and the most pods that ran at once on it.
type nodes struct {
	mu               sync.Mutex
	fit              bool
	running, highest int
}

func (n *nodes) fits() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fit
}

func (n *nodes) setFit(fit bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fit = fit
}

// started counts a pod's process; the returned function ends it.
func (n *nodes) started() func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.running++
	n.highest = max(n.highest, n.running)
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.running--
	}
}

// most is the most pods that ran at once.
func (n *nodes) most() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.highest
}

func startKubelet(f *fixture, paused bool) *kubelet {
	return startKubeletWith(f, kubeletOptions{paused: paused})
}

func startKubeletWith(f *fixture, options kubeletOptions) *kubelet {
	k := &kubelet{f: f, kubeletOptions: options, running: map[types.UID]*exec.Cmd{}, stopped: map[string]int64{}, logs: map[string]*testenv.SyncBuffer{}, secrets: map[string]map[string][]byte{}}
	nodeName := ""
	if options.serveLogs {
		nodeName = k.registerNode()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			k.sync(ctx, nodeName)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	f.T.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, cmd := range k.running {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	return k
}

func (k *kubelet) startedPods() []*corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*corev1.Pod(nil), k.started...)
}

func (k *kubelet) sync(ctx context.Context, nodeName string) {
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(k.f.Namespace)); err != nil {
		return
	}
	present := map[types.UID]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		present[pod.UID] = true
		k.mu.Lock()
		cmd, running := k.running[pod.UID]
		if _, stopped := k.stopped[pod.Name]; running && !stopped && pod.DeletionTimestamp != nil {
			// A pod being deleted is stopped with SIGTERM, and removed once its process
			// ended (see start).
			k.stopped[pod.Name] = ptr.Deref(pod.DeletionGracePeriodSeconds, -1)
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		k.mu.Unlock()
		if !running && pod.Status.StartTime == nil && pod.DeletionTimestamp == nil && !k.paused {
			if k.nodes != nil && !k.schedule(ctx, pod) {
				continue
			}
			k.start(ctx, pod, nodeName)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for uid, cmd := range k.running {
		if !present[uid] {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			delete(k.running, uid)
		}
	}
}

// schedule plays the scheduler for a pod: with no node that fits, it marks the pod
// unschedulable, once; with one, it records the pod as scheduled, which changes it as a
// binding does, and says whether it may start: not when the pod changed or went meanwhile.
func (k *kubelet) schedule(ctx context.Context, pod *corev1.Pod) bool {
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
	if !k.nodes.fits() {
		if _, ok := unschedulable(pod); ok {
			return false
		}
		scheduled.Status, scheduled.Reason, scheduled.Message = corev1.ConditionFalse, corev1.PodReasonUnschedulable, "0/1 nodes are available: 1 Insufficient cpu."
	}
	current := pod.DeepCopy()
	current.Status.Phase = corev1.PodPending
	current.Status.Conditions = []corev1.PodCondition{scheduled}
	// The pod's resourceVersion makes the update fail when the pod changed since it was read.
	if err := env.Client.Status().Update(ctx, current); err != nil {
		return false
	}
	*pod = *current
	return scheduled.Status == corev1.ConditionTrue
}

func (k *kubelet) start(ctx context.Context, pod *corev1.Pod, nodeName string) {
	c := pod.Spec.Containers[0]
	// As a kubelet, it starts the container only once its Secret is there.
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: c.EnvFrom[0].SecretRef.Name}, secret); err != nil {
		return
	}
	if nodeName != "" {
		// The scheduler's part: a pod's logs are read from the node it is bound to.
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: nodeName}}
		if err := env.Client.SubResource("binding").Create(ctx, pod, binding); err != nil {
			return
		}
	}
	dir := k.f.T.TempDir()
	termination := filepath.Join(dir, "termination-log")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	config := env.Config
	if k.asServiceAccount {
		config = serviceAccountConfig(pod.Namespace, pod.Spec.ServiceAccountName)
	}
	if err := writeKubeconfigOf(config, kubeconfig); err != nil {
		return
	}
	access := []string{"--kubeconfig", kubeconfig}
	var serviceEnv []string
	if _, ok := secret.Data[terraformer.EnvAPIToken]; ok {
		// The token the executor requested for the pod, and the API server's address,
		// which a kubelet gives every container.
		host, err := url.Parse(env.Config.Host)
		if err != nil {
			return
		}
		access, serviceEnv = nil, []string{"KUBERNETES_SERVICE_HOST=" + host.Hostname(), "KUBERNETES_SERVICE_PORT=" + host.Port()}
	}
	// The in-cluster configuration and the image's paths, as this machine has them.
	args := append(c.Args[:len(c.Args):len(c.Args)], access...)
	args = append(args, "--work-dir", filepath.Join(dir, "work"),
		"--termination-message-path", termination, "--terraform", k.f.executor.Settings.Terraform,
		"--plugin-mirror", k.f.executor.Settings.Plugins.Mirror, "--plugin-cache-dir", k.f.executor.Settings.Plugins.CacheDir)
	cmd := exec.Command(testenv.TerraformerBinary(k.f.T), args...)
	cmd.Env = append(runEnv(homeOf(dir), os.TempDir(), nil), serviceEnv...)
	for key, value := range secret.Data {
		cmd.Env = append(cmd.Env, key+"="+string(value))
	}
	// The container's own variables, such as its trace context, but the paths of the
	// credential files, which are in volumes this kubelet does not mount.
	for _, v := range c.Env {
		switch {
		case v.ValueFrom == nil && !strings.HasPrefix(v.Value, podCredentialsDir):
			cmd.Env = append(cmd.Env, v.Name+"="+v.Value)
		case v.ValueFrom != nil && v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.uid":
			cmd.Env = append(cmd.Env, v.Name+"="+string(pod.UID))
		}
	}
	logs := &testenv.SyncBuffer{}
	cmd.Stdout = io.MultiWriter(k.f.Output, logs)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return
	}
	k.mu.Lock()
	k.started = append(k.started, pod.DeepCopy())
	k.secrets[pod.Name] = secret.Data
	k.running[pod.UID] = cmd
	k.logs[pod.Name] = logs
	k.mu.Unlock()
	ended := func() {}
	if k.nodes != nil {
		ended = k.nodes.started()
	}
	started := metav1.Now()
	k.setStatus(pod, corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started})

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
		ended()
	}()
	go func() {
		var deadline <-chan time.Time
		if s := pod.Spec.ActiveDeadlineSeconds; s != nil {
			deadline = time.After(time.Duration(*s) * time.Second)
		}
		reason := ""
		select {
		case <-exited:
		case <-deadline:
			reason = "DeadlineExceeded"
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
		}
		k.mu.Lock()
		delete(k.running, pod.UID)
		k.mu.Unlock()
		message, _ := os.ReadFile(termination)
		if k.loseTerminationMessages {
			message = nil
		}
		phase := corev1.PodSucceeded
		if cmd.ProcessState.ExitCode() != 0 || reason != "" {
			phase = corev1.PodFailed
		}
		if k.unreportedExits && reason == "" {
			k.removeIfDeleted(pod)
			return
		}
		k.setStatus(pod, corev1.PodStatus{Phase: phase, Reason: reason, StartTime: &started, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  c.Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(cmd.ProcessState.ExitCode()), Message: string(message)}},
		}}})
		k.removeIfDeleted(pod)
	}()
}

// registerNode starts the kubelet's log endpoint and registers a Node pointing at it;
// the API server, which verifies no kubelet certificate unless told to, proxies pod log
// requests to it.
func (k *kubelet) registerNode() string {
	g := NewWithT(k.f.T)
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /containerLogs/<namespace>/<pod>/<container>
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
		k.mu.Lock()
		logs, ok := k.logs[parts[min(1, len(parts)-1)]]
		k.mu.Unlock()
		if !strings.HasPrefix(r.URL.Path, "/containerLogs/") || len(parts) != 3 || !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, logs.String())
	}))
	k.f.T.Cleanup(server.Close)
	host, port, err := net.SplitHostPort(server.Listener.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	portNumber, err := strconv.Atoi(port)
	g.Expect(err).NotTo(HaveOccurred())

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-" + k.f.Namespace}}
	g.Expect(env.Client.Create(context.Background(), node)).To(Succeed())
	k.f.T.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(portNumber)
	g.Expect(env.Client.Status().Update(context.Background(), node)).To(Succeed())
	return node.Name
}

// stoppedWithGrace returns the grace period of the deletion that stopped the pod's
// process, and whether one did.
func (k *kubelet) stoppedWithGrace(name string) (int64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	grace, ok := k.stopped[name]
	return grace, ok
}

// removeIfDeleted removes a pod being deleted whose process ended, as the kubelet does
// once it reported the pod's containers stopped.
func (k *kubelet) removeIfDeleted(pod *corev1.Pod) {
	current := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), current); err != nil || current.UID != pod.UID || current.DeletionTimestamp == nil {
		return
	}
	_ = env.Client.Delete(context.Background(), current, client.GracePeriodSeconds(0), client.Preconditions{UID: &current.UID})
}

func (k *kubelet) setStatus(pod *corev1.Pod, status corev1.PodStatus) {
	current := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), current); err != nil || current.UID != pod.UID {
		return
	}
	// The scheduler's condition stays, as with a real kubelet.
	if status.Conditions == nil {
		status.Conditions = current.Status.Conditions
	}
	current.Status = status
	_ = env.Client.Status().Update(context.Background(), current)
}

func (f *fixture) podExecutor() *PodExecutor {
	clientset, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		f.T.Fatal(err)
	}
	return &PodExecutor{
		Client:             env.Client,
		Clientset:          clientset,
		Image:              "terraseed/terraformer:test",
		ServiceAccountName: "terraformer",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resourceQuantity("100m"), corev1.ResourceMemory: resourceQuantity("256Mi"),
		}},
		CreationTimeout: 30 * time.Second,
		RunTimeout:      5 * time.Minute,
		PollInterval:    100 * time.Millisecond,
		PodLabels:       map[string]string{"networking.gardener.cloud/to-dns": "allowed", run.LabelPurpose: "overridden"},
	}
}

func TestPodExecutorRunsTerraformInAPod(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 3)
	k := startKubelet(f, false)
	owner := &metav1.OwnerReference{APIVersion: extensionsv1alpha1.GroupVersion.String(), Kind: "Infrastructure", Name: "infra", UID: "0b7a1d1e-1111-4a7e-9b31-2f1f1e0c0001"}
	req := f.request(run.Apply)
	req.Owner = owner

	result, err := f.podExecutor().Run(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Outputs["names"]).To(HaveLen(3))
	g.Expect(f.Items(g)).To(HaveLen(3))
	g.Expect(result.Phases).To(And(HaveKeyWithValue("init", BeNumerically(">", 0)), HaveKeyWithValue("apply", BeNumerically(">", 0))), "from the termination message")

	pods := k.startedPods()
	g.Expect(pods).To(HaveLen(1))
	pod := pods[0]
	g.Expect(pod.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
	g.Expect(pod.OwnerReferences).To(ConsistOf(*owner))
	g.Expect(pod.Labels).To(And(HaveKeyWithValue(run.LabelInfrastructure, "infra"), HaveKeyWithValue(run.LabelPurpose, string(run.PurposeInfra)), HaveKeyWithValue(labelCommand, "apply")))
	g.Expect(pod.Labels).To(HaveKeyWithValue("networking.gardener.cloud/to-dns", "allowed"), "the seed's network-policy labels")
	g.Expect(pod.Labels).NotTo(HaveKeyWithValue(run.LabelPurpose, "overridden"), "extra labels never replace a run's own")
	g.Expect(pod.Spec.ServiceAccountName).To(Equal("terraformer"))
	g.Expect(*pod.Spec.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(pod.Spec.Containers[0].Resources.Requests).To(HaveKey(corev1.ResourceCPU))
	g.Expect(pod.Spec.ActiveDeadlineSeconds).To(HaveValue(BeEquivalentTo(300)))
	g.Expect(pod.Spec.Containers[0].Env).To(ConsistOf(And(HaveField("Name", terraformer.EnvPodUID), HaveField("ValueFrom.FieldRef.FieldPath", "metadata.uid"))),
		"credentials only through the Secret; the pod's UID")

	// Finished pods and their credentials are cleaned up.
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.PodName()}, &corev1.Pod{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.EnvSecretName()}, &corev1.Secret{}))).To(BeTrue())
}

func TestPodExecutorAdoptsTheRunningPodAfterARestart(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 20)
	// The run pod waits at the gate until the test opens it: it is surely still running
	// when the restarted controller looks, however fast the machine.
	gate := f.NewGate(4)
	f.WriteChainConfig(20, gate)
	k := startKubelet(f, false)
	first := f.podExecutor()

	ctx, stopController := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := first.Run(ctx, f.request(run.Apply))
		done <- err
	}()
	gate.WaitUntilReached()
	stopController()
	g.Expect(<-done).To(MatchError(context.Canceled))

	// The restarted controller's executor is another instance; the pod still runs.
	second := f.podExecutor()
	_, err := second.Run(context.Background(), f.request(run.Destroy))
	g.Expect(err).To(MatchError(run.ErrRunInProgress), "another command waits for the running pod")
	gate.Open()
	_, err = second.Run(context.Background(), f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k.startedPods()).To(HaveLen(1), "the running pod was adopted, not started twice")
	g.Expect(f.Items(g)).To(HaveLen(20))
}

// A restarted controller whose Infrastructure changed meanwhile asks for an apply of
// another configuration: the running pod of the older one is not taken for it.
func TestPodExecutorAdoptsOnlyARunOfTheSameConfiguration(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 5)
	gate := f.NewGate(2)
	f.WriteChainConfig(5, gate)
	k := startKubelet(f, false)
	older, newer := f.request(run.Apply), f.request(run.Apply)
	older.Digest, newer.Digest = "0123456789abcdef", "fedcba9876543210"

	ctx, stopController := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.podExecutor().Run(ctx, older)
		done <- err
	}()
	gate.WaitUntilReached()
	stopController()
	g.Expect(<-done).To(MatchError(context.Canceled))

	second := f.podExecutor()
	_, err := second.Run(context.Background(), newer)
	g.Expect(err).To(MatchError(run.ErrRunInProgress), "the pod of the older configuration is not adopted")
	g.Expect(k.startedPods()).To(HaveLen(1))
	gate.Open()
	g.Eventually(func(g Gomega) {
		_, err := second.Run(context.Background(), newer)
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	pods := k.startedPods()
	g.Expect(pods).To(HaveLen(2), "the newer configuration ran in a pod of its own once the older one ended")
	g.Expect(pods[1].Labels).To(HaveKeyWithValue(labelDigest, newer.Digest))
}

func TestPodExecutorDeadlines(t *testing.T) {
	// Enough resources that one at a time they outlast the run deadline.
	f := newFixture(t, 100)

	t.Run("creation", func(t *testing.T) {
		g := NewWithT(t)
		k := startKubelet(f, true)
		e := f.podExecutor()
		e.CreationTimeout = time.Second
		_, err := e.Run(context.Background(), f.request(run.Apply))
		g.Expect(err).To(MatchError(errCreationDeadline))
		g.Expect(k.startedPods()).To(BeEmpty())
		g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.PodName()}, &corev1.Pod{}))).To(BeTrue())
	})

	t.Run("run", func(t *testing.T) {
		g := NewWithT(t)
		held, gate := heldApply(t)
		t.Cleanup(gate.Open)
		startKubelet(held, false)
		e := held.podExecutor()
		// Long enough for init and plan to reach the gate on a loaded machine; the progress
		// read often enough that the last one read before the deadline is the gate's.
		e.RunTimeout = 8 * time.Second
		e.Settings.ProgressInterval = 100 * time.Millisecond
		req := held.request(run.Apply)
		req.Progress = func(run.Progress) {}
		_, err := e.Run(context.Background(), req)
		g.Expect(err).To(MatchError(ErrRunDeadline))
		re := tftest.ExpectRunError(g, err)
		g.Expect(re.Message).To(MatchRegexp(`; when stopped it was applying \d+/\d+: creating \S+$`), "what the run was doing at its deadline")
		g.Expect(errorcodes.Retryable(tftest.CodesOf(re))).To(BeTrue())
		// Stopped by SIGTERM at the deadline, the run saved what it had created.
		created, listed := held.ExpectNoLostStateEntry(g)
		g.Expect(created).To(Equal(2), "the run got to its gate")
		g.Expect(listed).To(BeNumerically(">=", 1))
	})
}

func TestPodExecutorReportsTerraformErrors(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	f.WriteConfig("syntax-error")
	startKubelet(f, false)
	_, err := f.podExecutor().Run(context.Background(), f.request(run.Apply))
	re := tftest.ExpectRunError(g, err)
	g.Expect(tftest.CodesOf(re)).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
	g.Expect(re.Message).To(ContainSubstring("Unterminated template string"))
	g.Expect(re.Phases).To(ConsistOf(BeNumerically(">", 0)), "init found the error; nothing ran after it")
	g.Expect(re.Phases).To(HaveKey("init"))
}

func TestPodExecutorReadsTheLogOfAPodThatLeftNoTerminationMessage(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	f.WriteConfig("syntax-error")
	startKubeletWith(f, kubeletOptions{serveLogs: true, loseTerminationMessages: true})
	e := f.podExecutor()
	clientset, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	e.Clientset = clientset
	_, err = e.Run(context.Background(), f.request(run.Apply))
	re := tftest.ExpectRunError(g, err)
	t.Logf("message: %s", re.Message)
	g.Expect(re.Message).To(ContainSubstring("Unterminated template string"), "terraform's error, found in the log")
	g.Expect(strings.Count(re.Message, "Unterminated template string")).To(Equal(1), "each error once")
	g.Expect(tftest.CodesOf(re)).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
}

func resourceQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// A run pod's CPU, disk and memory are bounded: a provider plugin that spins or fills its
// volumes is held in its pod, and each emptyDir is bounded by the pod's ephemeral storage.
func TestRunPodsAreBounded(t *testing.T) {
	g := NewWithT(t)
	limits := corev1.ResourceList{
		corev1.ResourceCPU: resourceQuantity("2"), corev1.ResourceMemory: resourceQuantity("2Gi"), corev1.ResourceEphemeralStorage: resourceQuantity("1Gi"),
	}
	e := &PodExecutor{Image: "terraseed/terraformer:test", Resources: corev1.ResourceRequirements{Limits: limits}}
	req := run.Request{ID: run.ID{Namespace: "ns", Name: "a", Purpose: run.PurposeInfra}, Command: run.Apply}
	pod := e.podFor(req, req.ID.Labels(), nil, false)
	g.Expect(pod.Spec.Containers[0].Resources.Limits).To(Equal(limits))
	g.Expect(pod.Spec.Volumes).To(HaveLen(2))
	for _, v := range pod.Spec.Volumes {
		g.Expect(v.EmptyDir).NotTo(BeNil(), v.Name)
		g.Expect(v.EmptyDir.SizeLimit).To(HaveValue(Equal(resourceQuantity("1Gi"))), v.Name)
	}
}

func TestRunPodsNameTheirPurposeUnlessItIsTheTerraformersDefault(t *testing.T) {
	g := NewWithT(t)
	e := &PodExecutor{Image: "terraseed/terraformer:test"}
	for purpose, args := range map[run.Purpose][]string{
		run.PurposeInfra: {"apply", "--namespace", "ns", "--name", "a", "--work-dir", "/work"},
		"controlplane":   {"apply", "--namespace", "ns", "--name", "a", "--work-dir", "/work", "--purpose", "controlplane"},
	} {
		req := run.Request{ID: run.ID{Namespace: "ns", Name: "a", Purpose: purpose}, Command: run.Apply}
		pod := e.podFor(req, req.ID.Labels(), nil, false)
		g.Expect(pod.Name).To(Equal("a." + string(purpose) + ".tf-run"))
		g.Expect(pod.Spec.Containers[0].Args).To(Equal(args))
		g.Expect(pod.Spec.Containers[0].EnvFrom[0].SecretRef.Name).To(Equal("a." + string(purpose) + ".tf-env"))
	}
}

// A run pod being deleted (after a restart: the old leader's Stop, a namespace deletion)
// still runs within its grace period: terraform stops and the terraformer saves the
// state. Until the pod has ended or is gone, its run is under way: nobody may snapshot
// the state nor start another run of the same objects. The pod is held here by a
// finalizer, with the phase a kubelet reports while the container stops.
func TestPodExecutorCountsATerminatingRunPodAsActive(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 1)
	e := f.podExecutor()
	req := f.request(run.Apply)

	pod, err := e.create(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	pod.Finalizers = append(pod.Finalizers, "terraseed.test/hold")
	g.Expect(env.Client.Update(ctx, pod)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	started := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	progress := `{"phase":"apply"}`
	annotated, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{report.AnnotationProgress: progress}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Objects.ConfigName()}}, client.RawPatch(types.MergePatchType, annotated))).To(Succeed())
	credentials := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.EnvSecretName()}, credentials)).To(Succeed())

	g.Expect(env.Client.Delete(ctx, pod)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	g.Expect(pod.DeletionTimestamp).NotTo(BeNil())
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))

	active, err := e.Active(ctx, f.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeTrue(), "a run pod still running in its grace period is under way")
	for _, command := range []run.Command{run.Apply, run.Destroy} {
		_, err = f.podExecutor().Run(ctx, f.request(command))
		g.Expect(err).To(MatchError(run.ErrRunInProgress), "%s waits for the terminating pod", command)
	}
	current := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(credentials), current)).To(Succeed())
	g.Expect(current.UID).To(Equal(credentials.UID), "the running pod's credentials are left alone")
	config := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ConfigName()}, config)).To(Succeed())
	g.Expect(config.Annotations).To(HaveKeyWithValue(report.AnnotationProgress, progress), "the running pod's progress is left alone")

	// The container ended (the kubelet reports it before it removes the pod): the run is over.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Status.Phase = corev1.PodFailed
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
	active, err = e.Active(ctx, f.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeFalse(), "a run pod that ended is no run under way")

	g.Expect(env.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
	}).Should(BeTrue())
	active, err = e.Active(ctx, f.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeFalse())
}

// Stop stops a run under way in its pod: the pod is deleted with its own grace period,
// the stop timeout, in which the terraformer relays the SIGTERM to terraform, which stops,
// and saves the state. The run is under way until the pod ended; a rerun then finds every
// resource in the state.
func TestPodExecutorStopsARunGracefully(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const resources = 12
	f := newFixture(t, resources)
	gate := f.NewGate(4)
	f.WriteChainConfig(resources, gate)
	// Bound to a node, as a scheduled pod is: its deletion then takes its grace period.
	k := startKubeletWith(f, kubeletOptions{serveLogs: true})
	e := f.podExecutor()
	e.Settings.StopTimeout = 45 * time.Second

	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, f.request(run.Apply))
		done <- err
	}()
	gate.WaitUntilReached()
	g.Expect(e.Stop(ctx, f.Objects.ID)).To(Succeed())
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.PodName()}, pod); err == nil {
		g.Expect(pod.DeletionTimestamp).NotTo(BeNil(), "the pod is being deleted")
	}

	var err error
	g.Eventually(done).WithTimeout(2 * time.Minute).Should(Receive(&err))
	g.Expect(err).To(MatchError(ContainSubstring("interrupted; the state was saved")), "the terraformer stopped terraform and saved the state")
	grace, stopped := k.stoppedWithGrace(f.Objects.ID.PodName())
	g.Expect(stopped).To(BeTrue(), "the pod was stopped by its deletion")
	g.Expect(grace).To(BeEquivalentTo(45+120+10), "with the pod's grace period: the stop timeout, the final save and a margin")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.PodName()}, &corev1.Pod{}))
	}).WithTimeout(time.Minute).Should(BeTrue())
	active, err := e.Active(ctx, f.Objects.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeFalse())
	g.Expect(e.Stop(ctx, f.Objects.ID)).To(Succeed(), "no run pod: nothing to stop")

	created, _ := f.ExpectNoLostStateEntry(g)
	g.Expect(created).To(Equal(gate.Index+1), "nothing was created past the gate")
	gate.Open()
	_, err = e.Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	f.ExpectEachItemOnceInState(g, resources)
	g.Expect(k.startedPods()).To(HaveLen(2))
}

// The run pods of the pod executor New builds from an operator's configuration carry the
// configured requests and memory limit: a terraform run that outgrows its limit is
// killed alone, not the node's other pods.
func TestNewGivesRunPodsTheConfiguredResources(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("100m"), corev1.ResourceMemory: resourceQuantity("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resourceQuantity("2Gi")},
	}
	built, err := New(context.Background(), env.Client, env.Config, Config{
		Kind: KindPod, Image: "terraseed/terraformer:test", ServiceAccountName: "terraformer",
		Resources: resources, CreationTimeout: time.Minute, RunTimeout: time.Minute,
	})
	g.Expect(err).NotTo(HaveOccurred())

	pod := pendingRunPod(t, f, built)
	got := pod.Spec.Containers[0].Resources
	g.Expect(got.Requests.Cpu().String()).To(Equal("100m"))
	g.Expect(got.Requests.Memory().String()).To(Equal("256Mi"))
	g.Expect(got.Limits.Memory().String()).To(Equal("2Gi"))
}

// Run pods go where the operator's placement says: the API server admits them with the
// priority class, node selector, tolerations and spread, and a spread without a selector
// spreads the run pods among themselves.
func TestNewPlacesRunPodsAsConfigured(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	class := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "terraseed-runs-"}, Value: 1000}
	g.Expect(env.Client.Create(context.Background(), class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	tolerations, err := ParseTolerations(`[{"key":"dedicated","operator":"Equal","value":"runs","effect":"NoSchedule"},{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":60}]`)
	g.Expect(err).NotTo(HaveOccurred())
	spread, err := ParseTopologySpreadConstraints(`[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`)
	g.Expect(err).NotTo(HaveOccurred())
	placement := Placement{PriorityClassName: class.Name, NodeSelector: map[string]string{"pool": "runs"}, Tolerations: tolerations, TopologySpreadConstraints: spread}
	built, err := New(context.Background(), env.Client, env.Config, Config{
		Kind: KindPod, Image: "terraseed/terraformer:test", ServiceAccountName: "terraformer", Placement: placement,
		CreationTimeout: time.Minute, RunTimeout: time.Minute,
	})
	g.Expect(err).NotTo(HaveOccurred())

	pod := pendingRunPod(t, f, built)
	g.Expect(pod.Spec.PriorityClassName).To(Equal(class.Name))
	g.Expect(pod.Spec.Priority).To(HaveValue(BeEquivalentTo(1000)), "the API server resolved the class")
	g.Expect(pod.Spec.NodeSelector).To(Equal(map[string]string{"pool": "runs"}))
	g.Expect(pod.Spec.Tolerations).To(ContainElements(tolerations))
	g.Expect(pod.Spec.TopologySpreadConstraints).To(HaveLen(1))
	selector, err := metav1.LabelSelectorAsSelector(pod.Spec.TopologySpreadConstraints[0].LabelSelector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector.Matches(labels.Set(pod.Labels))).To(BeTrue(), "the spread counts the run pods")
	g.Expect(selector.Matches(labels.Set{"app": "other"})).To(BeFalse(), "and nothing else")
}

// A placement the API server would refuse, or that could not mean what it says, is
// refused before any pod, naming the field.
func TestPlacementErrorsNameTheField(t *testing.T) {
	g := NewWithT(t)
	for data, field := range map[string]string{
		`[{"key":"dedicated","operator":"Equals","value":"runs"}]`:             `tolerations[0].operator "Equals"`,
		`[{"key":"a"},{"key":"dedicated","operator":"Exists","value":"runs"}]`: `tolerations[1].value "runs"`,
		`[{"key":"dedicated","value":"no spaces"}]`:                            `tolerations[0].value "no spaces"`,
		`[{"operator":"Equal","value":"x"}]`:                                   `tolerations[0].operator`,
		`[{"key":"a","effect":"NoRun"}]`:                                       `tolerations[0].effect "NoRun"`,
		`[{"key":"a","effect":"NoSchedule","tolerationSeconds":5}]`:            `tolerations[0].tolerationSeconds`,
		`[{"key":"a","colour":"blue"}]`:                                        `unknown field "colour"`,
		`{"key":"a"}`:                                                          `not a JSON list`,
	} {
		_, err := ParseTolerations(data)
		g.Expect(err).To(MatchError(ContainSubstring(field)), data)
	}
	for data, field := range map[string]string{
		`[{"maxSkew":0,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}]`:                                                                      `topologySpreadConstraints[0].maxSkew 0`,
		`[{"maxSkew":1,"topologyKey":"","whenUnsatisfiable":"DoNotSchedule"}]`:                                                                          `topologySpreadConstraints[0].topologyKey ""`,
		`[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"Never"}]`:                                                                              `topologySpreadConstraints[0].whenUnsatisfiable "Never"`,
		`[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchExpressions":[{"key":"a","operator":"Near"}]}}]`: `topologySpreadConstraints[0].labelSelector`,
	} {
		_, err := ParseTopologySpreadConstraints(data)
		g.Expect(err).To(MatchError(ContainSubstring(field)), data)
	}
	g.Expect(Placement{PriorityClassName: "Runs_High"}.Validate()).To(MatchError(ContainSubstring(`priorityClassName "Runs_High"`)))
	g.Expect(Placement{NodeSelector: map[string]string{"pool": "run pods"}}.Validate()).To(MatchError(ContainSubstring(`nodeSelector "pool" value "run pods"`)))
	g.Expect(Config{Kind: KindPod, Image: "i", Placement: Placement{PriorityClassName: "Runs_High"}}.Validate()).To(MatchError(ContainSubstring("placement: priorityClassName")))
	tolerations, err := ParseTolerations("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tolerations).To(BeNil(), "none configured")
}

// pendingRunPod starts an apply of f with e, and returns its pod once the API server
// admitted it: no kubelet here, the pod stays pending, and the run ends with the test.
func pendingRunPod(t *testing.T, f *fixture, e Executor) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, f.request(run.Apply))
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	pod := &corev1.Pod{}
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.PodName()}, pod)
	}).WithTimeout(time.Minute).Should(Succeed())
	return pod
}

// terraformPIDsOf are the terraform processes a kubelet's run pods started.
func (k *kubelet) terraformPIDsOf(terraformPath string) []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var pids []int
	for _, cmd := range k.running {
		for _, pid := range tftest.Descendants(cmd.Process.Pid) {
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == terraformPath {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// terraform killed while a create is under way records nothing of it, though the provider
// may have made it: the run pod reported the create, and the run's error names it; a run of
// another configuration that finds that pod failed names it as well, before it clears the
// report for its own run.
func TestARunPodsCreatesUnderWayWhenTerraformIsKilledAreNamed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 3)
	gate := f.NewGate(1)
	f.WriteChainConfig(3, gate)
	k := startKubelet(f, false)
	e := f.podExecutor()

	runCtx, stopFollowing := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		_, err := e.Run(runCtx, f.request(run.Apply))
		ended <- err
	}()
	gate.WaitUntilReached()
	// The controller that followed the run is gone: the pod goes on alone.
	stopFollowing()
	<-ended
	pids := k.terraformPIDsOf(testenv.Terraform(t))
	g.Expect(pids).NotTo(BeEmpty())
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	g.Eventually(func(g Gomega) {
		pod := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.PodName()}, pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodFailed))
	}).WithTimeout(time.Minute).Should(Succeed())

	req := f.request(run.Apply)
	req.Digest = "0123456789abcdef" // another configuration's
	_, err := e.Run(ctx, req)
	var runErr *run.Error
	g.Expect(errors.As(err, &runErr)).To(BeTrue(), "%v", err)
	g.Expect(runErr.Interrupted).To(ConsistOf("terraform_data.gate_1"))
	g.Expect(errors.Is(err, errEarlierRunInterrupted)).To(BeTrue())
}
