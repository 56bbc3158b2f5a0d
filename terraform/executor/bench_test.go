package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// The benchmarks below compare, side by side, the executor's run of the 20-resource test
// configuration with bare terraform doing the same work on its own copy of it (both with
// the mirror and the shared plugin cache). Each iteration is one pair; which of the two
// runs first alternates, because the second finds more of the machine warmed up. Run them
// with at least ten pairs; `make bench` runs twenty (-benchtime 20x), as one pair's ratio
// ranges over ±25% on a shared machine.
const benchResources = 20

// BenchmarkApply compares a create from nothing with bare `terraform init && terraform
// apply`, and reports the time of `terraform init` alone and the state writes of the
// executor's apply.
func BenchmarkApply(b *testing.B) {
	cliConfig := testenv.TerraformCLIConfig(b)
	var pairs sideBySide
	var init time.Duration
	writes := 0
	for b.Loop() {
		f := newFixture(b, benchResources)
		bare := newBareTerraform(b, f, cliConfig, nil)
		pairs.add(func() time.Duration {
			initTime := bare.run("init", "-input=false")
			init += initTime
			return initTime + bare.run("apply", "-auto-approve", "-input=false")
		}, func() time.Duration {
			counted := countStateWrites(b, f)
			took := f.timedRun(b, f.request(run.Apply))
			writes += counted()
			return took
		})
	}
	pairs.report(b)
	b.ReportMetric(init.Seconds()/float64(b.N), "init-s/op")
	b.ReportMetric(float64(writes)/float64(b.N), "state-writes/apply")
}

// BenchmarkReconcileNothingToChange compares the reconcile Gardener asks for on every shoot
// reconcile, when nothing changed, with a bare `terraform apply` with nothing to change:
// "checked" with protected types (the executor plans), "unguarded" without (it applies).
func BenchmarkReconcileNothingToChange(b *testing.B) {
	for _, bc := range []struct {
		name      string
		protected []string
	}{{"checked", []string{"kubectl_manifest"}}, {"unguarded", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, benchResources)
			bare := newBareTerraform(b, f, testenv.TerraformCLIConfig(b), nil)
			bare.run("init", "-input=false")
			bare.run("apply", "-auto-approve", "-input=false")
			if _, err := f.run(run.Apply); err != nil {
				b.Fatal(err)
			}
			req := f.request(run.Apply)
			req.ProtectedTypes = bc.protected
			var pairs sideBySide
			writes := 0
			for b.Loop() {
				pairs.add(func() time.Duration {
					return bare.run("apply", "-auto-approve", "-input=false")
				}, func() time.Duration {
					counted := countStateWrites(b, f)
					took := f.timedRun(b, req)
					writes += counted()
					return took
				})
			}
			pairs.report(b)
			b.ReportMetric(float64(writes)/float64(b.N), "state-writes/op")
		})
	}
}

// BenchmarkApplyChecked compares an apply that changes every object in place, over a
// state holding them, with protected types (so that the executor checks its plan before
// applying it), with bare `terraform plan -out && terraform apply` of the plan.
func BenchmarkApplyChecked(b *testing.B) {
	f := newFixture(b, benchResources)
	vars := func(revision int) map[string]any {
		return map[string]any{"namespace": f.Namespace, "resources": benchResources, "revision": strconv.Itoa(revision)}
	}
	bare := newBareTerraform(b, f, testenv.TerraformCLIConfig(b), vars(0))
	bare.run("init", "-input=false")
	bare.run("apply", "-auto-approve", "-input=false")
	f.writeVars(b, vars(0))
	if _, err := f.run(run.Apply); err != nil {
		b.Fatal(err)
	}
	req := f.request(run.Apply)
	req.ProtectedTypes = []string{"kubectl_manifest"}
	var pairs sideBySide
	revision := 0
	for b.Loop() {
		revision++
		bare.writeVars(vars(revision))
		f.writeVars(b, vars(revision))
		pairs.add(func() time.Duration {
			return bare.run("plan", "-input=false", "-out=bench.tfplan") + bare.run("apply", "-input=false", "bench.tfplan")
		}, func() time.Duration {
			result, took := f.timedResult(b, req)
			if got := len(result.Plan.Addresses("update")); got != benchResources {
				b.Fatalf("the plan updates %d objects, not %d", got, benchResources)
			}
			return took
		})
	}
	pairs.report(b)
}

// sideBySide holds the times of pairs of a bare terraform run and the executor's run of
// the same work.
type sideBySide struct {
	bare, executor []time.Duration
}

// add times one pair, the two in turns first.
func (s *sideBySide) add(bare, executor func() time.Duration) {
	var b, e time.Duration
	if len(s.bare)%2 == 0 {
		b = bare()
		e = executor()
	} else {
		e = executor()
		b = bare()
	}
	s.bare, s.executor = append(s.bare, b), append(s.executor, e)
}

// report gives the medians, and the median, least and greatest of the pairs' ratios: a
// pair runs at nearly the same time, so its ratio is the least touched by what else the
// machine does.
func (s *sideBySide) report(b *testing.B) {
	ratios := make([]float64, len(s.bare))
	for i := range s.bare {
		ratios[i] = s.executor[i].Seconds() / s.bare[i].Seconds()
	}
	b.ReportMetric(median(durationsInSeconds(s.bare)), "bare-s/op")
	b.ReportMetric(median(durationsInSeconds(s.executor)), "executor-s/op")
	b.ReportMetric(median(ratios), "executor/bare")
	b.ReportMetric(slices.Min(ratios), "executor/bare-min")
	b.ReportMetric(slices.Max(ratios), "executor/bare-max")
	b.ReportMetric(float64(len(ratios)), "pairs")
}

func durationsInSeconds(ds []time.Duration) []float64 {
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	return s
}

func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// bareTerraform is terraform run by hand, as a user would, on a copy of the test
// configuration.
type bareTerraform struct {
	b   *testing.B
	dir string
	env []string
}

func newBareTerraform(b *testing.B, f *fixture, cliConfig string, vars map[string]any) *bareTerraform {
	t := &bareTerraform{b: b, dir: b.TempDir()}
	copyConfig(b, tftest.Config(b, "kubectl"), t.dir, f.Namespace, benchResources)
	if vars != nil {
		t.writeVars(vars)
	}
	t.env = append(runEnv(filepath.Join(t.dir, "home"), os.TempDir(), map[string]string{"TF_VAR_kubeconfig": f.Kubeconfig}), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1")
	return t
}

func (t *bareTerraform) run(args ...string) time.Duration {
	cmd := exec.Command(testenv.Terraform(t.b), args...)
	cmd.Dir = t.dir
	cmd.Env = t.env
	started := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.b.Fatalf("terraform %v: %v\n%s", args, err, out)
	}
	return time.Since(started)
}

func (t *bareTerraform) writeVars(vars map[string]any) {
	data, _ := json.Marshal(vars)
	if err := os.WriteFile(filepath.Join(t.dir, state.VarsJSONKey), data, 0o600); err != nil {
		t.b.Fatal(err)
	}
}

func (f *fixture) writeVars(b *testing.B, vars map[string]any) {
	data, _ := json.Marshal(vars)
	if err := f.Objects.WriteVars(context.Background(), env.Client, data); err != nil {
		b.Fatal(err)
	}
}

// timedRun runs req through the local executor and returns how long it took.
func (f *fixture) timedRun(b *testing.B, req run.Request) time.Duration {
	_, took := f.timedResult(b, req)
	return took
}

func (f *fixture) timedResult(b *testing.B, req run.Request) (*run.Result, time.Duration) {
	started := time.Now()
	result, err := f.executor.Run(context.Background(), req)
	took := time.Since(started)
	if err != nil {
		b.Fatal(err)
	}
	return result, took
}

// copyConfig writes the configuration files and their variables into dir as a user would.
func copyConfig(b *testing.B, files map[string]string, dir, namespace string, resources int) {
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
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
	// Watched from the state as it is now, which is not a write.
	list := &corev1.ConfigMapList{}
	selector := []client.ListOption{client.InNamespace(f.Namespace), client.MatchingFields{"metadata.name": f.Objects.StateName()}}
	if err := wc.List(context.Background(), list, selector...); err != nil {
		b.Fatal(err)
	}
	last := ""
	if len(list.Items) > 0 {
		last = list.Items[0].Annotations[state.AnnotationSerial]
	}
	w, err := wc.Watch(context.Background(), &corev1.ConfigMapList{}, append(selector, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
	if err != nil {
		b.Fatal(err)
	}
	count := make(chan int)
	go func() {
		n := 0
		for event := range w.ResultChan() {
			cm, ok := event.Object.(*corev1.ConfigMap)
			if !ok || (event.Type != watch.Added && event.Type != watch.Modified) {
				continue
			}
			// Finalizer and label changes are not state writes.
			if serial := cm.Annotations[state.AnnotationSerial]; serial != last {
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

// BenchmarkSchedulerWithRunsWaiting is what the scheduler itself costs a run submitted
// to a seed's backlog: the submit and the drop of one run while N others wait for the one
// slot, each of them in one of 200 projects and a quarter of them urgent (a DNSRecord's).
// Every submit orders the waiting runs again, so that each knows how many are ahead.
func BenchmarkSchedulerWithRunsWaiting(b *testing.B) {
	for _, waiting := range []int{1000, 4000} {
		b.Run(strconv.Itoa(waiting), func(b *testing.B) {
			ctx := context.Background()
			runs := newTimedRuns(time.Hour)
			s := &Scheduler{Executor: runs, MaxRuns: 1}
			startScheduler(b, s)
			submit := func(i int) run.Request {
				project := fmt.Sprintf("p%d", i%200)
				req := budgetRequest(fmt.Sprintf("s%d", i), "", project)
				req.Urgent = i%4 == 0
				if err := s.Submit(ctx, req, run.Priority(i%3)); err != nil {
					b.Fatal(err)
				}
				return req
			}
			for i := range waiting + 1 {
				submit(i)
			}
			const perOp = 100
			b.ResetTimer()
			for range b.N {
				for i := range perOp {
					req := submit(waiting + 1 + i)
					if !s.Cancel(req.ID) {
						b.Fatal("the run did not wait")
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*perOp), "µs/submit")
		})
	}
}
