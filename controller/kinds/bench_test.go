package kinds_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/test/testenv"
)

const benchConcurrency = 5

// BenchmarkCreate creates N local Infrastructures at once and measures the time until all
// succeeded, against N bare `terraform init && terraform apply` of the same rendered
// configurations run with the same concurrency, side by side in each iteration.
func BenchmarkCreate(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var controllerTime, bareTime time.Duration
			var requests, reconciled int64
			for b.Loop() {
				// The bare applies create their own objects, named apart, so that the
				// controller's runs create theirs from nothing too.
				bareTime += bareApplies(b, benchInfrastructures(b, env.Namespace(b), n))
				ns := env.Namespace(b)
				infras := benchInfrastructures(b, ns, n)

				counter := &requestCounter{}
				config := rest.CopyConfig(env.Config)
				config.Wrap(counter.wrap)
				c := startControllerWith(b, ns, filepath.Join(b.TempDir(), "runs"), config, benchConcurrency)
				waitUntilWorking(b, ns)
				started := time.Now()
				counter.reset()
				for _, infra := range infras {
					if err := env.Client.Create(context.Background(), infra); err != nil {
						b.Fatal(err)
					}
				}
				waitAllSucceeded(b, infras)
				controllerTime += time.Since(started)
				requests += counter.count.Load()
				reconciled += int64(n)
				c.stop()
			}
			iterations := float64(b.N)
			b.ReportMetric(controllerTime.Seconds()/iterations, "controller-s/op")
			b.ReportMetric(bareTime.Seconds()/iterations, "bare-s/op")
			b.ReportMetric(controllerTime.Seconds()/bareTime.Seconds(), "controller/bare")
			b.ReportMetric(float64(requests)/float64(reconciled), "api-requests/infrastructure")
			b.ReportMetric(peakRSSMiB(), "peak-rss-MiB")
		})
	}
}

func benchInfrastructures(b *testing.B, ns string, n int) []*extensionsv1alpha1.Infrastructure {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"},
		Data:       map[string][]byte{"kubeconfig": adminKubeconfig(b)},
	}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		b.Fatal(err)
	}
	var infras []*extensionsv1alpha1.Infrastructure
	for i := range n {
		s := newShootIn(ns, fmt.Sprintf("infra-%d", i), "10.250.0.0/19", "10.250.32.0/19")
		infras = append(infras, s.infra)
	}
	return infras
}

// bareApplies renders each Infrastructure and applies it with plain terraform and local state.
func bareApplies(b *testing.B, infras []*extensionsv1alpha1.Infrastructure) time.Duration {
	registry, err := templates.NewRegistry()
	if err != nil {
		b.Fatal(err)
	}
	provider, err := registry.Provider("local")
	if err != nil {
		b.Fatal(err)
	}
	// Like the controller's runs, these link the providers from the mirror.
	cliConfig := testenv.TerraformCLIConfig(b)
	dirs := make([]string, len(infras))
	for i, infra := range infras {
		rendered, err := provider.Render(templates.Input{Infrastructure: infra})
		if err != nil {
			b.Fatal(err)
		}
		dirs[i] = b.TempDir()
		for name, content := range rendered.Files {
			mustWrite(b, filepath.Join(dirs[i], name), []byte(content))
		}
		mustWrite(b, filepath.Join(dirs[i], "terraform.tfvars.json"), rendered.TFVarsJSON)
	}
	started := time.Now()
	work := make(chan string)
	var wg sync.WaitGroup
	for range benchConcurrency {
		wg.Go(func() {
			for dir := range work {
				for _, args := range [][]string{{"init", "-input=false"}, {"apply", "-auto-approve", "-input=false"}} {
					cmd := exec.Command(testenv.Terraform(b), args...)
					cmd.Dir = dir
					cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TF_CLI_CONFIG_FILE=" + cliConfig, "TF_IN_AUTOMATION=1", "TF_VAR_kubeconfig=" + string(adminKubeconfig(b))}
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Errorf("terraform %v in %s: %v\n%s", args, dir, err, out)
						return
					}
				}
			}
		})
	}
	for _, dir := range dirs {
		work <- dir
	}
	close(work)
	wg.Wait()
	return time.Since(started)
}

// waitAllSucceeded watches the Infrastructures until each has succeeded: one request, so
// that waiting adds no load of its own to what is measured.
func waitAllSucceeded(b *testing.B, infras []*extensionsv1alpha1.Infrastructure) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := wc.Watch(ctx, &extensionsv1alpha1.InfrastructureList{}, client.InNamespace(infras[0].Namespace))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	pending := map[string]bool{}
	for _, infra := range infras {
		pending[infra.Name] = true
	}
	for len(pending) > 0 {
		select {
		case event, ok := <-w.ResultChan():
			if !ok {
				b.Fatalf("the watch ended with %d Infrastructures pending", len(pending))
			}
			current, ok := event.Object.(*extensionsv1alpha1.Infrastructure)
			if !ok || !pending[current.Name] || current.Status.LastOperation == nil {
				continue
			}
			switch current.Status.LastOperation.State {
			case extensionsv1alpha1.LastOperationStateSucceeded:
				delete(pending, current.Name)
			case extensionsv1alpha1.LastOperationStateError, extensionsv1alpha1.LastOperationStateFailed:
				b.Fatalf("%s: %s", current.Name, current.Status.LastOperation.Description)
			}
		case <-ctx.Done():
			b.Fatalf("%d Infrastructures did not succeed in time", len(pending))
		}
	}
}

// waitUntilWorking returns once the controller's workers reconcile: they start only after
// its sources synced, which the time to succeed would otherwise include. It waits for an
// Infrastructure with an invalid configuration to fail, which takes no terraform run and
// is not retried.
func waitUntilWorking(b *testing.B, ns string) {
	s := newShootIn(ns, "not-measured", "10.250.16.0/19") // host bits set
	if err := env.Client.Create(context.Background(), s.infra); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		current := &extensionsv1alpha1.Infrastructure{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(s.infra), current); err != nil {
			b.Fatal(err)
		}
		if last := current.Status.LastOperation; last != nil && last.State == extensionsv1alpha1.LastOperationStateFailed {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the controller did not start working")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requestCounter counts the API requests the controller makes.
type requestCounter struct{ count atomic.Int64 }

func (c *requestCounter) reset() { c.count.Store(0) }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.count.Add(1)
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// peakRSSMiB is the peak resident memory of this process: the controller and the test
// around it; terraform runs in child processes.
func peakRSSMiB() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return float64(usage.Maxrss) / 1024
}

func mustWrite(b *testing.B, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
}
