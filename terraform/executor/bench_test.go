package executor

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
	"github.com/terraseed/terraseed/test/testenv"
)

// BenchmarkApply measures, side by side in each iteration, a bare `terraform init &&
// terraform apply` of the test configuration against a local-executor run of the same
// configuration (both with the mirror and the shared plugin cache), the time of
// `terraform init` alone, and the state writes of the executor's 20-resource apply.
func BenchmarkApply(b *testing.B) {
	const resources = 20
	cliConfig := testenv.TerraformCLIConfig(b)
	var bare, local, init time.Duration
	writes, iteration := 0, 0
	for b.Loop() {
		f := newFixture(b, resources)
		bareDir := b.TempDir()
		copyConfig(b, "testdata/kubectl", bareDir, f.namespace, resources)
		terraform := func(args ...string) time.Duration {
			cmd := exec.Command(testenv.Terraform(b), args...)
			cmd.Dir = bareDir
			cmd.Env = append(runEnv(map[string]string{"TF_VAR_kubeconfig": f.kubeconfig}), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1")
			started := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("terraform %v: %v\n%s", args, err, out)
			}
			return time.Since(started)
		}
		runBare := func() {
			initTime := terraform("init", "-input=false")
			bare += initTime + terraform("apply", "-auto-approve", "-input=false")
			init += initTime
		}
		runExecutor := func() {
			counted := countStateWrites(b, f)
			started := time.Now()
			if _, err := f.run(terraformer.Apply); err != nil {
				b.Fatal(err)
			}
			local += time.Since(started)
			writes += counted()
		}
		// Whichever runs second finds more of the machine warmed up: they take turns.
		if iteration%2 == 0 {
			runBare()
			runExecutor()
		} else {
			runExecutor()
			runBare()
		}
		iteration++
	}
	n := float64(b.N)
	b.ReportMetric(bare.Seconds()/n, "bare-s/op")
	b.ReportMetric(local.Seconds()/n, "executor-s/op")
	b.ReportMetric(local.Seconds()/bare.Seconds(), "executor/bare")
	b.ReportMetric(init.Seconds()/n, "init-s/op")
	b.ReportMetric(float64(writes)/n, "state-writes/apply")
}

// copyConfig writes the configuration and its variables into dir as a user would.
func copyConfig(b *testing.B, from, dir, namespace string, resources int) {
	entries, err := os.ReadDir(from)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		content, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), content, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	vars, _ := json.Marshal(map[string]any{"namespace": namespace, "resources": resources})
	if err := os.WriteFile(filepath.Join(dir, state.VarsJSONKey), vars, 0o600); err != nil {
		b.Fatal(err)
	}
}

// countStateWrites watches the state ConfigMap and returns a function that stops
// watching and returns how many times it was written.
func countStateWrites(b *testing.B, f *fixture) func() int {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &corev1.ConfigMapList{}, client.InNamespace(f.namespace), client.MatchingFields{"metadata.name": f.objects.StateName()})
	if err != nil {
		b.Fatal(err)
	}
	count := make(chan int)
	go func() {
		n, last := 0, ""
		for event := range w.ResultChan() {
			cm, ok := event.Object.(*corev1.ConfigMap)
			if !ok || (event.Type != watch.Added && event.Type != watch.Modified) {
				continue
			}
			// Finalizer and label changes are not state writes.
			if serial := cm.Annotations[state.AnnotationStateSerial]; serial != last {
				n, last = n+1, serial
			}
		}
		count <- n
	}()
	return func() int {
		// Let the last events arrive before counting.
		time.Sleep(200 * time.Millisecond)
		w.Stop()
		return <-count
	}
}
