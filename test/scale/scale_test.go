package scale_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/test/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	if podExecutor() {
		os.Exit(runOnNode(m))
	}
	os.Exit(testenv.Run(m, &env))
}

// BenchmarkScale runs one controller process, with the local executor, against envtest
// with N Infrastructures of the cheap provider (TERRASEED_SCALE_N, 1,000 by default):
// how long N creates take to settle, what the settled controller costs, what a restart
// starts, and how long a create and a delete take while every drift plan is due, against
// the same on an idle controller.
func BenchmarkScale(b *testing.B) {
	n := 1000
	if v := os.Getenv("TERRASEED_SCALE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("TERRASEED_SCALE_N: %v", err)
		}
	}
	for b.Loop() {
		s := newSeed(b, n)
		c := s.start(time.Hour)

		started := time.Now()
		requests := c.metric("rest_client_requests_total", nil)
		for i := range n {
			s.create(fmt.Sprintf("shoot-%04d", i))
		}
		s.waitSettled(n, time.Hour)
		settle := time.Since(started)
		b.ReportMetric(settle.Seconds(), "settle-s")
		b.ReportMetric(float64(n)/settle.Hours(), "runs/h")
		b.ReportMetric((c.metric("rest_client_requests_total", nil)-requests)/float64(n), "api-requests/create")

		time.Sleep(10 * time.Second)
		b.ReportMetric(c.rssMiB(), "settled-rss-MiB")
		b.ReportMetric(c.anonMiB(), "settled-anon-MiB")
		b.ReportMetric(c.cpuSeconds(), "settled-cpu-s")
		c.saveHeapProfile(fmt.Sprintf("settled-%d", n))
		before := c.metric("rest_client_requests_total", nil)
		time.Sleep(30 * time.Second)
		b.ReportMetric((c.metric("rest_client_requests_total", nil)-before)/30, "settled-api-requests/s")

		idleCreate, idleDelete := s.createAndDeleteMedian("idle")
		b.ReportMetric(idleCreate.Seconds(), "idle-create-s")
		b.ReportMetric(idleDelete.Seconds(), "idle-delete-s")

		// A restart with everything settled and the drift interval of production.
		c.stop()
		c = s.start(time.Hour)
		time.Sleep(time.Minute)
		b.ReportMetric(c.metric("terraseed_terraform_runs_total", map[string]string{"command": "apply"})+c.metric("terraseed_terraform_runs_total", map[string]string{"command": "destroy"}), "restart-first-minute-applies")
		b.ReportMetric(c.metric("terraseed_terraform_runs_total", map[string]string{"command": "plan"}), "restart-first-minute-drift-plans")

		// A restart with a drift interval so short that the drift plans due outnumber what
		// their share of the run slots can run: the drift queue stays full.
		c.stop()
		c = s.start(20 * time.Second)
		time.Sleep(30 * time.Second)
		b.ReportMetric(c.metric("terraseed_terraform_runs_waiting", map[string]string{"priority": "drift"}), "drift-plans-waiting")
		busyCreate, busyDelete := s.createAndDeleteMedian("busy")
		b.ReportMetric(busyCreate.Seconds(), "busy-create-s")
		b.ReportMetric(busyDelete.Seconds(), "busy-delete-s")
		b.ReportMetric(busyCreate.Seconds()/idleCreate.Seconds(), "create-busy/idle")
		b.ReportMetric(busyDelete.Seconds()/idleDelete.Seconds(), "delete-busy/idle")
		b.ReportMetric(c.metric("terraseed_terraform_runs_total", map[string]string{"command": "plan"}), "busy-drift-plans")
		c.stop()
	}
}

// seed is the shoots of one benchmark, one namespace each, and the controller binary.
type seed struct {
	b          *testing.B
	binary     string
	kubeconfig string
	workDir    string
	prefix     string
	// infraType is the Infrastructures' type, "cheap" when empty; extraArgs are added to
	// the controller's (an executor's): see podSeed.
	infraType string
	extraArgs []string
}

func newSeed(b *testing.B, n int) *seed {
	b.Helper()
	dir := b.TempDir()
	s := &seed{b: b, binary: testenv.ControllerBinary(b), kubeconfig: filepath.Join(dir, "kubeconfig"), workDir: filepath.Join(dir, "runs"),
		prefix: fmt.Sprintf("scale-%d-", time.Now().Unix())}
	kubeconfig, err := env.AdminKubeconfig()
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(s.kubeconfig, kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	return s
}

// create creates the namespace, the credentials and the Infrastructure of one shoot.
func (s *seed) create(name string) {
	ctx := context.Background()
	ns := s.prefix + name
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"}, Data: map[string][]byte{"token": []byte("token-" + name)}},
		&extensionsv1alpha1.Infrastructure{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infrastructure"},
			Spec: extensionsv1alpha1.InfrastructureSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: cmp.Or(s.infraType, "cheap"), ProviderConfig: &k8sruntime.RawExtension{Raw: []byte(`{"items":3}`)}},
				Region:      "local-1",
				SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
			},
		},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			s.b.Fatal(err)
		}
	}
}

// waitSettled waits until n Infrastructures of this seed have been created.
func (s *seed) waitSettled(n int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		list := &extensionsv1alpha1.InfrastructureList{}
		if err := env.Client.List(context.Background(), list); err != nil {
			s.b.Fatal(err)
		}
		settled := 0
		for _, infra := range list.Items {
			last := infra.Status.LastOperation
			if strings.HasPrefix(infra.Namespace, s.prefix) && last != nil && last.State == extensionsv1alpha1.LastOperationStateSucceeded {
				settled++
			}
		}
		if settled >= n {
			return
		}
		if time.Now().After(deadline) {
			s.b.Fatalf("%d of %d Infrastructures settled in %s", settled, n, timeout)
		}
		time.Sleep(time.Second)
	}
}

// latencySamples is how many shoots a latency is the median of: one sample is at the
// mercy of whatever else the machine does in that second.
const latencySamples = 5

// createAndDeleteMedian creates and deletes latencySamples more shoots, one after the
// other, and returns the median time a create and a delete took.
func (s *seed) createAndDeleteMedian(name string) (create, deletion time.Duration) {
	var creates, deletions []time.Duration
	for i := range latencySamples {
		c, d := s.createAndDelete(fmt.Sprintf("%s-%d", name, i))
		creates, deletions = append(creates, c), append(deletions, d)
	}
	return median(creates), median(deletions)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// createAndDelete creates one more shoot, then deletes it, and returns how long each took.
func (s *seed) createAndDelete(name string) (create, deletion time.Duration) {
	ctx := context.Background()
	started := time.Now()
	s.create(name)
	key := client.ObjectKey{Namespace: s.prefix + name, Name: "infrastructure"}
	infra := &extensionsv1alpha1.Infrastructure{}
	for {
		if err := env.Client.Get(ctx, key, infra); err != nil {
			s.b.Fatal(err)
		}
		if last := infra.Status.LastOperation; last != nil && last.State == extensionsv1alpha1.LastOperationStateSucceeded {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	create = time.Since(started)
	started = time.Now()
	if err := env.Client.Delete(ctx, infra); err != nil {
		s.b.Fatal(err)
	}
	for !apierrors.IsNotFound(env.Client.Get(ctx, key, infra)) {
		time.Sleep(100 * time.Millisecond)
	}
	return create, time.Since(started)
}

// controllerProcess is the controller binary serving the seed.
type controllerProcess struct {
	b       *testing.B
	cmd     *exec.Cmd
	metrics string
	// pprof is the base URL of the controller's profiling endpoints.
	pprof string
}

// saveHeapProfile writes the controller's heap profile, after a garbage collection, to
// the directory TERRASEED_SCALE_PROFILES names as name.pb.gz (`go tool pprof` reads it);
// without the variable it does nothing.
func (c *controllerProcess) saveHeapProfile(name string) {
	dir := os.Getenv("TERRASEED_SCALE_PROFILES")
	if dir == "" {
		return
	}
	resp, err := http.Get(c.pprof + "heap?gc=1")
	if err != nil {
		c.b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.b.Fatalf("the heap profile: %s", resp.Status)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.b.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, name+".pb.gz"))
	if err != nil {
		c.b.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		c.b.Fatal(err)
	}
}

// start runs the controller with the local executor until stop.
func (s *seed) start(driftInterval time.Duration) *controllerProcess {
	b := s.b
	address := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
	pprofAddress := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
	providers, err := filepath.Abs("testdata/providers")
	if err != nil {
		b.Fatal(err)
	}
	log, err := os.Create(filepath.Join(b.TempDir(), "controller.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(s.binary, "run", "--kubeconfig", s.kubeconfig,
		"--executor=local", "--terraform", testenv.Terraform(b), "--plugin-mirror", testenv.ProviderMirror(b),
		"--work-dir", s.workDir, "--providers-dir", providers, "--provider-types=cheap",
		"--metrics-bind-address", address, "--metrics-secure=false", "--health-probe-bind-address=0", "--heartbeat-namespace=",
		"--pprof-bind-address", pprofAddress, "--drift-interval", driftInterval.String())
	cmd.Args = append(cmd.Args, s.extraArgs...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "TERRASEED_LOG_LEVEL=error")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &controllerProcess{b: b, cmd: cmd, metrics: "http://" + address + "/metrics", pprof: "http://" + pprofAddress + "/debug/pprof/"}
	b.Cleanup(c.stop)
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := c.families(); err == nil {
			return c
		}
		if time.Now().After(deadline) {
			b.Fatalf("the controller serves no metrics; its log is in %s", log.Name())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *controllerProcess) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

func (c *controllerProcess) families() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(c.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// metric sums the samples of a counter or gauge whose labels include the given ones.
func (c *controllerProcess) metric(name string, labels map[string]string) float64 {
	families, err := c.families()
	if err != nil {
		c.b.Fatal(err)
	}
	sum := 0.0
	family, ok := families[name]
	if !ok {
		return 0
	}
samples:
	for _, m := range family.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue samples
			}
		}
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum
}

// rssMiB is the controller's resident memory, its terraform runs not included.
func (c *controllerProcess) rssMiB() float64 { return float64(c.status().VmRSS) / (1 << 20) }

// anonMiB is the part of rssMiB that is the process's own memory: without the pages of
// its binary it maps, which are shared, can be dropped at any time, and vary by some MiB
// between two builds of nearly the same code (where the linker places what init reads).
func (c *controllerProcess) anonMiB() float64 { return float64(c.status().RssAnon) / (1 << 20) }

// cpuSeconds is the CPU time the controller process used so far (user and system), its
// terraform runs not included: what the controller's own work costs, less noisy on a
// shared machine than the time until it settled.
func (c *controllerProcess) cpuSeconds() float64 {
	stat, err := c.proc().Stat()
	if err != nil {
		c.b.Fatal(err)
	}
	return stat.CPUTime()
}

func (c *controllerProcess) status() procfs.ProcStatus {
	status, err := c.proc().NewStatus()
	if err != nil {
		c.b.Fatal(err)
	}
	return status
}

func (c *controllerProcess) proc() procfs.Proc {
	p, err := procfs.NewProc(c.cmd.Process.Pid)
	if err != nil {
		c.b.Fatal(err)
	}
	return p
}
