package scale_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"

	"github.com/terraseed/terraseed/test/image"
	"github.com/terraseed/terraseed/test/realnode"
	"github.com/terraseed/terraseed/test/testenv"
)

// The pod executor's benchmark runs on the real node of test/realnode: its API server
// serves the seed, its kubelet and containerd run the run pods, of the image assembled
// from the working tree as test/e2e assembles it. The controller runs on this machine,
// outside the node, as the binary the image holds, against the node's API server.
const scaleImage = "localhost/terraseed/terraseed:scale"

// podExecutor says whether `make bench-scale EXECUTOR=pod` asked for the pod executor.
func podExecutor() bool { return os.Getenv("TERRASEED_SCALE_EXECUTOR") == "pod" }

// node is the real node of the pod executor's benchmark.
var node *realnode.Node

// runOnNode is TestMain with the pod executor: it starts the node, imports the image,
// attaches the test environment to the node's API server and runs the benchmarks.
func runOnNode(m *testing.M) int {
	if err := realnode.Available(realnode.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "the pod executor's benchmark runs on a real node:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	buildDir, err := os.MkdirTemp("", "terraseed-scale-image-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(buildDir)
	archive := filepath.Join(buildDir, "terraseed.tar")
	assembled := make(chan error, 1)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { assembled <- image.AssembleRepository(root, buildDir, archive, scaleImage, os.Stderr) }()
	node, err = realnode.Start(ctx, realnode.Options{Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the node:", err)
		<-assembled
		return 1
	}
	defer func() {
		if err := node.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the node:", err)
		}
	}()
	if err := <-assembled; err != nil {
		fmt.Fprintln(os.Stderr, "assembling the image:", err)
		return 1
	}
	if err := node.ImportImage(ctx, archive); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfig, err := os.ReadFile(node.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	attached, err := testenv.Attach(node.Config, kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := testenv.RunIn(m, attached, &env)
	if code != 0 {
		fmt.Fprint(os.Stderr, node.LogTails(8<<10))
	}
	return code
}

// BenchmarkScalePods is BenchmarkScale with the pod executor on the real node (N is 200
// by default: a run pod costs the node more than a local run costs the controller), and
// side by side with it a second controller with the local executor serving the same
// configuration under another type, so that a create with each executor is measured in
// turn on the same machine at the same time: the pod ÷ local ratio. It adds what a run
// pod costs besides terraform, from the controller's terraseed_run_pod_* metrics.
func BenchmarkScalePods(b *testing.B) {
	if !podExecutor() {
		b.Skip("the pod executor's benchmark: make bench-scale EXECUTOR=pod")
	}
	n := 200
	if v := os.Getenv("TERRASEED_SCALE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("TERRASEED_SCALE_N: %v", err)
		}
	}
	for b.Loop() {
		providers := sideBySideProviders(b)
		pods := podSeed(b, n, providers)
		local := localSeed(b, n, providers)
		api := apiServerRequests(b, node.Clientset)
		c := pods.start(time.Hour)

		started := time.Now()
		requests := c.metric("rest_client_requests_total", nil)
		seedRequests := api()
		for i := range n {
			pods.create(fmt.Sprintf("shoot-%04d", i))
		}
		pods.waitSettled(n, time.Hour)
		settle := time.Since(started)
		b.ReportMetric(settle.Seconds(), "settle-s")
		b.ReportMetric(float64(n)/settle.Hours(), "runs/h")
		b.ReportMetric((c.metric("rest_client_requests_total", nil)-requests)/float64(n), "api-requests/create")
		b.ReportMetric((api()-seedRequests)/float64(n), "apiserver-requests/create")
		reportPodSpans(b, c, "")

		time.Sleep(10 * time.Second)
		b.ReportMetric(c.rssMiB(), "settled-rss-MiB")
		b.ReportMetric(c.anonMiB(), "settled-anon-MiB")
		before := c.metric("rest_client_requests_total", nil)
		time.Sleep(30 * time.Second)
		b.ReportMetric((c.metric("rest_client_requests_total", nil)-before)/30, "settled-api-requests/s")

		// The same seed with the local executor, settled right after: the throughput of
		// each executor on the same machine.
		l := local.start(time.Hour)
		started = time.Now()
		for i := range n {
			local.create(fmt.Sprintf("shoot-%04d", i))
		}
		local.waitSettled(n, time.Hour)
		localSettle := time.Since(started)
		b.ReportMetric(localSettle.Seconds(), "local-settle-s")
		b.ReportMetric(float64(n)/localSettle.Hours(), "local-runs/h")
		b.ReportMetric(settle.Seconds()/localSettle.Seconds(), "settle-pod/local")

		// The same create with each executor in turn: whatever else the machine does
		// weighs on both alike.
		idleSpans, localSpans := c.podSpans(), l.podSpans()
		podCreate, podDelete, localCreate, localDelete := createAndDeleteInTurn(pods, local, "idle")
		reportPodSpansSince(b, c, idleSpans, "idle-")
		reportPodSpansSince(b, l, localSpans, "local-idle-")
		l.stop()
		b.ReportMetric(podCreate.Seconds(), "idle-create-s")
		b.ReportMetric(podDelete.Seconds(), "idle-delete-s")
		b.ReportMetric(localCreate.Seconds(), "local-idle-create-s")
		b.ReportMetric(localDelete.Seconds(), "local-idle-delete-s")
		b.ReportMetric(podCreate.Seconds()/localCreate.Seconds(), "create-pod/local")
		b.ReportMetric((podCreate - localCreate).Seconds(), "create-pod-minus-local-s")
		b.ReportMetric(podDelete.Seconds()/localDelete.Seconds(), "delete-pod/local")

		c.stop()
		c = pods.start(time.Hour)
		time.Sleep(time.Minute)
		b.ReportMetric(c.metric("terraseed_terraform_runs_total", map[string]string{"command": "apply"})+c.metric("terraseed_terraform_runs_total", map[string]string{"command": "destroy"}), "restart-first-minute-applies")
		b.ReportMetric(c.metric("terraseed_terraform_runs_total", map[string]string{"command": "plan"}), "restart-first-minute-drift-plans")

		c.stop()
		c = pods.start(20 * time.Second)
		time.Sleep(30 * time.Second)
		b.ReportMetric(c.metric("terraseed_terraform_runs_waiting", map[string]string{"priority": "drift"}), "drift-plans-waiting")
		busyCreate, busyDelete := pods.createAndDeleteMedian("busy")
		b.ReportMetric(busyCreate.Seconds(), "busy-create-s")
		b.ReportMetric(busyDelete.Seconds(), "busy-delete-s")
		b.ReportMetric(busyCreate.Seconds()/podCreate.Seconds(), "create-busy/idle")
		b.ReportMetric(busyDelete.Seconds()/podDelete.Seconds(), "delete-busy/idle")
		b.ReportMetric(c.metric("terraseed_terraform_runs_total", map[string]string{"command": "plan"}), "busy-drift-plans")
		reportPodSpans(b, c, "busy-")
		c.stop()
	}
}

// sideBySideProviders is a providers directory holding the cheap provider twice: as
// "cheap", served by the pod executor's controller, and as "cheap-local", the same
// configuration served by the local executor's.
func sideBySideProviders(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for _, t := range []string{"cheap", "cheap-local"} {
		if err := os.MkdirAll(filepath.Join(dir, t), 0o755); err != nil {
			b.Fatal(err)
		}
		entries, err := os.ReadDir(filepath.Join("testdata", "providers", "cheap"))
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join("testdata", "providers", "cheap", e.Name()))
			if err != nil {
				b.Fatal(err)
			}
			if e.Name() == "provider.yaml" {
				data = []byte(strings.Replace(string(data), "type: cheap\n", "type: "+t+"\n", 1))
			}
			if err := os.WriteFile(filepath.Join(dir, t, e.Name()), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir
}

// podSeed is a seed served by a controller with the pod executor, whose run pods run
// the benchmark's image on the node, with the chart's defaults for them.
func podSeed(b *testing.B, n int, providers string) *seed {
	s := newSeed(b, n)
	s.prefix = strings.Replace(s.prefix, "scale-", "scale-pod-", 1)
	s.extraArgs = []string{"--executor=pod", "--terraformer-image=" + scaleImage, "--plugin-mirror=/opt/terraseed/plugins",
		"--providers-dir", providers, "--provider-types=cheap"}
	return s
}

// localSeed is a seed of the same configuration as podSeed's, of type cheap-local,
// served by a controller with the local executor.
func localSeed(b *testing.B, n int, providers string) *seed {
	s := newSeed(b, n)
	s.prefix = strings.Replace(s.prefix, "scale-", "scale-local-", 1)
	s.infraType = "cheap-local"
	s.extraArgs = []string{"--providers-dir", providers, "--provider-types=cheap-local"}
	return s
}

// createAndDeleteInTurn creates and deletes latencySamples shoots of each seed, one of
// a then one of b, and returns the median create and delete of each.
func createAndDeleteInTurn(a, other *seed, name string) (aCreate, aDelete, otherCreate, otherDelete time.Duration) {
	var ac, ad, oc, od []time.Duration
	for i := range latencySamples {
		c, d := a.createAndDelete(fmt.Sprintf("%s-%d", name, i))
		ac, ad = append(ac, c), append(ad, d)
		c, d = other.createAndDelete(fmt.Sprintf("%s-%d", name, i))
		oc, od = append(oc, c), append(od, d)
	}
	return median(ac), median(ad), median(oc), median(od)
}

// podSpanMetrics are the histograms of what a run pod costs besides terraform, and of its
// terraform commands, with the unit each is reported in (seconds, or MiB for memory).
var podSpanMetrics = []struct {
	name   string
	labels map[string]string
	unit   string
}{
	{"terraseed_run_pod_span_seconds", map[string]string{"span": "created_to_terraformer"}, "pod-created-to-terraformer-s"},
	{"terraseed_run_pod_span_seconds", map[string]string{"span": "terraformer_to_terraform"}, "terraformer-to-terraform-s"},
	{"terraseed_terraform_phase_duration_seconds", map[string]string{"phase": "init"}, "terraform-init-s"},
	{"terraseed_terraform_phase_duration_seconds", map[string]string{"phase": "apply"}, "terraform-apply-s"},
	{"terraseed_terraform_phase_duration_seconds", map[string]string{"phase": "plan"}, "terraform-plan-s"},
	{"terraseed_terraform_phase_duration_seconds", map[string]string{"phase": "destroy"}, "terraform-destroy-s"},
	{"terraseed_run_pod_span_seconds", map[string]string{"span": "ended_to_outcome"}, "pod-ended-to-outcome-s"},
	{"terraseed_run_pod_peak_memory_bytes", nil, "pod-peak-memory-MiB"},
}

// histogramSample is the sum and count of histogram samples.
type histogramSample struct {
	sum   float64
	count uint64
}

// podSpans reads the histograms of podSpanMetrics, in their order.
func (c *controllerProcess) podSpans() []histogramSample {
	var samples []histogramSample
	for _, m := range podSpanMetrics {
		samples = append(samples, c.histogram(m.name, m.labels))
	}
	return samples
}

// reportPodSpans reports the means of what the controller's run pods cost besides
// terraform so far, and of their terraform commands.
func reportPodSpans(b *testing.B, c *controllerProcess, prefix string) {
	reportPodSpansSince(b, c, make([]histogramSample, len(podSpanMetrics)), prefix)
}

// reportPodSpansSince is reportPodSpans of the runs since podSpans returned before.
func reportPodSpansSince(b *testing.B, c *controllerProcess, before []histogramSample, prefix string) {
	b.Helper()
	for i, now := range c.podSpans() {
		count := now.count - before[i].count
		if count == 0 {
			continue
		}
		mean := (now.sum - before[i].sum) / float64(count)
		if strings.HasSuffix(podSpanMetrics[i].unit, "-MiB") {
			mean /= 1 << 20
		}
		b.ReportMetric(mean, prefix+podSpanMetrics[i].unit)
	}
}

// histogram sums the samples of the histograms whose labels include the given ones.
func (c *controllerProcess) histogram(name string, labels map[string]string) histogramSample {
	families, err := c.families()
	if err != nil {
		c.b.Fatal(err)
	}
	var h histogramSample
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, labels) {
			h.sum += m.GetHistogram().GetSampleSum()
			h.count += m.GetHistogram().GetSampleCount()
		}
	}
	return h
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if have[k] != v {
			return false
		}
	}
	return true
}

// apiServerRequests returns a function counting the requests the API server has
// served so far, of every client: the controller, the run pods, the kubelet, the
// scheduler and the controller manager.
func apiServerRequests(b *testing.B, clientset kubernetes.Interface) func() float64 {
	return func() float64 {
		data, err := clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(string(data)))
		if err != nil {
			b.Fatal(err)
		}
		sum := 0.0
		for _, m := range families["apiserver_request_total"].GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		return sum
	}
}
