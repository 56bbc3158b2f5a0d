package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/executor"
	tfrun "github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
	"github.com/terraseed/terraseed/test/testenv"
)

// succeededOrUnreported holds for the container statuses of a run pod that succeeded, as
// the pod was last seen: the executor deletes it once its terraformer said so, and the
// kubelet may not have reported the container's end by then; a failure it always reports.
var succeededOrUnreported = And(Not(BeEmpty()), HaveEach(Or(HaveField("State.Terminated", BeNil()), HaveField("State.Terminated.ExitCode", BeZero()))))

// run is one Infrastructure's run objects in a namespace of its own, run by the pod
// executor on the node with the assembled image, as the controller in a seed runs them.
type run struct {
	t          *testing.T
	namespace  string
	objects    state.RunObjects
	executor   *executor.PodExecutor
	kubeconfig []byte
	pods       *podLog
}

func newRun(t *testing.T, config string, vars map[string]any, kubeconfig []byte) *run {
	t.Helper()
	return newRunOf(t, configFiles(t, config), vars, kubeconfig)
}

// configFiles reads the files of a configuration of testdata.
func configFiles(t *testing.T, config string) map[string]string {
	t.Helper()
	g := NewWithT(t)
	entries, err := os.ReadDir(filepath.Join("testdata", config))
	g.Expect(err).NotTo(HaveOccurred())
	files := map[string]string{}
	for _, e := range entries {
		content, err := os.ReadFile(filepath.Join("testdata", config, e.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		files[e.Name()] = string(content)
	}
	return files
}

// newRunOf is newRun of the configuration files.
func newRunOf(t *testing.T, files map[string]string, vars map[string]any, kubeconfig []byte) *run {
	t.Helper()
	g := NewWithT(t)
	ns := namespace(t)
	r := &run{t: t, namespace: ns, objects: state.RunObjects{ID: tfrun.ID{Namespace: ns, Name: "infra", Purpose: tfrun.PurposeInfra}}, kubeconfig: kubeconfig}
	g.Expect(r.objects.WriteConfig(context.Background(), kube, files)).To(Succeed())
	vars["namespace"] = ns
	data, err := json.Marshal(vars)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.objects.WriteVars(context.Background(), kube, data)).To(Succeed())
	r.pods = watchPods(t, ns)
	// What the controller's pod executor is given by the chart (see newExecutor of the
	// manager): the image's mirror and the chart's ServiceAccount.
	r.executor = &executor.PodExecutor{
		Client:               kube,
		Clientset:            clientset,
		Image:                ImageName,
		ServiceAccountName:   terraformerAccount,
		ManageServiceAccount: true,
		Settings: terraformer.Settings{
			Plugins:     terraformer.Plugins{Mirror: "/opt/terraseed/plugins", CacheDir: "/tmp/plugin-cache"},
			StopTimeout: 2 * time.Minute,
		},
		CreationTimeout: runTimeout,
		RunTimeout:      runTimeout,
		PollInterval:    pollEvery,
		PodLabels:       map[string]string{"networking.gardener.cloud/to-dns": "allowed"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
		}},
	}
	return r
}

func (r *run) request(command tfrun.Command) tfrun.Request {
	return tfrun.Request{ID: r.objects.ID, Command: command, Env: map[string]string{"TF_VAR_kubeconfig": string(r.kubeconfig)}}
}

func (r *run) run(command tfrun.Command) (*tfrun.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*runTimeout)
	defer cancel()
	return r.executor.Run(ctx, r.request(command))
}

// start runs the command in the background; the returned channel receives its outcome.
func (r *run) start(command tfrun.Command) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := r.run(command)
		done <- err
	}()
	return done
}

// stored returns the names of the ConfigMaps and the ids of the terraform_data
// instances the stored state holds.
func (r *run) stored(g Gomega) (names, ids []string) {
	stored, err := r.objects.ReadState(context.Background(), kube)
	g.Expect(err).NotTo(HaveOccurred())
	names, ids, err = testenv.StateItems(stored)
	g.Expect(err).NotTo(HaveOccurred())
	return names, ids
}

// expectEveryItemInState checks that each item in the cluster is in the stored state,
// or at least the id it is named after is, so that a rerun adopts it instead of creating
// a second one.
func (r *run) expectEveryItemInState(g Gomega) {
	names, ids := r.stored(g)
	for _, item := range items(g, r.namespace) {
		parts := strings.SplitN(item, "-", 3)
		g.Expect(slices.Contains(names, item) || slices.Contains(ids, parts[2])).To(BeTrue(), "item %s is in the stored state", item)
	}
}

func (r *run) expectPodsCleanedUp(g Gomega) {
	g.Expect(apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKey{Namespace: r.namespace, Name: r.objects.ID.PodName()}, &corev1.Pod{}))).To(BeTrue(), "the run pod is deleted")
	g.Expect(apierrors.IsNotFound(kube.Get(context.Background(), client.ObjectKey{Namespace: r.namespace, Name: r.objects.ID.EnvSecretName()}, &corev1.Secret{}))).To(BeTrue(), "the credentials Secret is deleted")
}

// A run pod applies and destroys: the kubelet runs the assembled image as the
// unprivileged user on a read-only root file system, the executor reads the run's phases
// from the termination message the kubelet reports, and the API server serves the pod's
// log from the kubelet.
func TestRunPodAppliesAndDestroys(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	gate := startGate(t, node.Config)
	r := newRun(t, "items", map[string]any{"resources": 6}, gate.Kubeconfig())

	gate.HoldAfter(3)
	done := r.start(tfrun.Apply)
	g.Eventually(gate.Held).WithTimeout(runTimeout).WithPolling(pollEvery).Should(BeNumerically(">=", 1), "a create is held: the run is under way")
	pod := r.pods.running(t, r.objects.ID.PodName())
	g.Expect(pod.Spec.NodeName).To(Equal("terraseed-node"), "the scheduler placed the run pod")
	// Given no CA, the executor has the kubelet mount the pod's token, and the pod its
	// volumes on a read-only root.
	expectHardened(t, pod.Status.ContainerStatuses[0].ContainerID, true)
	logs, err := clientset.CoreV1().Pods(r.namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred(), "the API server reads the log from the kubelet")
	g.Expect(string(logs)).To(ContainSubstring("Creating..."), "terraform's output")

	gate.Open()
	var result error
	g.Eventually(done).WithTimeout(runTimeout).Should(Receive(&result))
	g.Expect(result).NotTo(HaveOccurred())
	g.Expect(items(g, r.namespace)).To(HaveLen(6))
	r.expectPodsCleanedUp(g)
	pods := r.pods.seen()
	g.Expect(pods).To(HaveLen(1), "one pod for one run")
	g.Expect(pods[0].Status.ContainerStatuses).To(succeededOrUnreported)
	// The run ended when the terraformer said it succeeded, after its final save, with
	// the termination message it wrote.
	config := &corev1.ConfigMap{}
	g.Expect(kube.Get(context.Background(), client.ObjectKey{Namespace: r.namespace, Name: r.objects.ConfigName()}, config)).To(Succeed())
	announced, ok := report.SucceededOf(config.Annotations)
	g.Expect(ok).To(BeTrue(), "the run pod said that its run succeeded")
	g.Expect(announced.Pod).To(Equal(pods[0].UID))
	g.Expect(announced.Message).To(ContainSubstring(`"phases"`), "its termination message")

	result2, err := r.run(tfrun.Destroy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result2.Phases).To(And(HaveKeyWithValue("init", BeNumerically(">", 0)), HaveKeyWithValue("destroy", BeNumerically(">", 0))), "from the termination message")
	g.Expect(items(g, r.namespace)).To(BeEmpty())
	r.expectPodsCleanedUp(g)
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.objects.ConfigName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.objects.VarsName()}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: r.objects.StateName()}},
	} {
		g.Expect(kube.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		g.Expect(obj.GetFinalizers()).NotTo(ContainElement(state.Finalizer), "%s is released after the destroy", obj.GetName())
	}
}

// A terraform error reaches the executor through the termination message the
// terraformer writes as the unprivileged user, classified, with the phases that ran.
func TestRunPodReportsTerraformErrors(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	r := newRun(t, "syntax-error", map[string]any{}, adminKubeconfig(t))
	_, err := r.run(tfrun.Apply)
	var re *tfrun.Error
	g.Expect(errors.As(err, &re)).To(BeTrue(), "%v", err)
	g.Expect(re.Blocks).NotTo(BeEmpty(), "terraform's error blocks, from the termination message")
	g.Expect(errorcodes.Classify(re.Blocks)).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
	g.Expect(re.Message).To(ContainSubstring("Unterminated template string"))
	g.Expect(re.Phases).To(HaveKey("init"), "the phases, from the termination message")
	pods := r.pods.seen()
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodFailed))
	g.Expect(pods[0].Status.ContainerStatuses[0].State.Terminated.Message).To(HavePrefix("{"), "the terraformer's own message, not the log")
	r.expectPodsCleanedUp(g)
}

// A run pod whose container is killed (SIGKILL, as the OOM killer would) mid-apply
// leaves no termination message: the kubelet reports the end of its log instead, which
// the executor reports. The state saved while terraform ran is kept, and the rerun
// creates the rest once: nothing is created twice.
func TestRunPodKilledMidApply(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	gate := startGate(t, node.Config)
	const n, before = 8, 4
	r := newRun(t, "items", map[string]any{"resources": n}, gate.Kubeconfig())
	r.executor.Settings.Parallelism = 2

	gate.HoldAfter(before)
	done := r.start(tfrun.Apply)
	g.Eventually(func(g Gomega) {
		names, _ := r.stored(g)
		g.Expect(names).To(HaveLen(before))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed(), "the first items are in the stored state")
	g.Eventually(gate.Held).WithTimeout(runTimeout).WithPolling(pollEvery).Should(BeNumerically(">=", 1))
	pod := r.pods.running(t, r.objects.ID.PodName())
	g.Expect(node.KillContainer(context.Background(), pod.Status.ContainerStatuses[0].ContainerID)).To(Succeed())

	var err error
	g.Eventually(done).WithTimeout(runTimeout).Should(Receive(&err))
	var re *tfrun.Error
	g.Expect(errors.As(err, &re)).To(BeTrue(), "%v", err)
	t.Logf("the killed run: %v", err)
	g.Expect(re.Invalid).To(BeFalse())
	g.Expect(errorcodes.Retryable(errorcodes.Classify(re.Blocks))).To(BeTrue(), "a killed run is retried")
	killed := r.pods.seen()
	g.Expect(killed).To(HaveLen(1))
	terminated := killed[0].Status.ContainerStatuses[0].State.Terminated
	g.Expect(terminated).NotTo(BeNil())
	g.Expect(terminated.ExitCode).To(BeEquivalentTo(137))
	g.Expect(terminated.Message).To(ContainSubstring("Creating..."), "the kubelet fell back to the log")
	g.Expect(re.Message).To(HavePrefix("the run pod's container was killed by signal 9; its log ends: "), "why the run ended, then what it was doing")

	names, _ := r.stored(g)
	g.Expect(names).To(HaveLen(before), "the state saved during the run is kept")
	r.expectEveryItemInState(g)

	gate.Open()
	_, err = r.run(tfrun.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	expectOneItemPerIndex(g, items(g, r.namespace), n)
	names, _ = r.stored(g)
	g.Expect(names).To(HaveLen(n))
	g.Expect(r.pods.seen()).To(HaveLen(2), "the killed pod and the rerun's")
	r.expectPodsCleanedUp(g)
}

// activeDeadlineSeconds: the kubelet stops a run that takes longer than the run timeout
// with SIGTERM; the terraformer stops terraform, saves the state and says so in its
// termination message, and the executor reports the deadline. The rerun finishes the job
// without creating anything twice.
func TestRunPodDeadline(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	gate := startGate(t, node.Config)
	// One create a second: the run needs two minutes, and gets the time terraform needs
	// to start on a busy machine and a few creates more.
	const n = 120
	r := newRun(t, "items", map[string]any{"resources": n}, gate.Kubeconfig())
	r.executor.Settings.Parallelism = 1
	r.executor.RunTimeout = 45 * time.Second
	gate.SlowDown(time.Second)

	_, err := r.run(tfrun.Apply)
	g.Expect(err).To(MatchError(executor.ErrRunDeadline))
	pods := r.pods.seen()
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Spec.ActiveDeadlineSeconds).To(Equal(ptr.To(int64(45))))
	g.Expect(pods[0].Status.Reason).To(Equal("DeadlineExceeded"))
	terminated := pods[0].Status.ContainerStatuses[0].State.Terminated
	g.Expect(terminated).NotTo(BeNil())
	g.Expect(terminated.Message).To(ContainSubstring("interrupted; the state was saved"), "the terraformer stopped on SIGTERM")
	created := len(items(g, r.namespace))
	t.Logf("%d of %d items created before the deadline", created, n)
	g.Expect(created).To(BeNumerically("<", n))
	r.expectEveryItemInState(g)

	gate.SlowDown(0)
	r.executor.Settings.Parallelism = 0
	r.executor.RunTimeout = runTimeout
	_, err = r.run(tfrun.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	expectOneItemPerIndex(g, items(g, r.namespace), n)
	r.expectPodsCleanedUp(g)
}
