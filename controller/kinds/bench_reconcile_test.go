package kinds_test

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
)

// BenchmarkReconcileNothingToChange measures the reconcile Gardener asks for on every
// shoot reconcile when nothing changed, from the annotation to the success: the
// controller's reads and writes around one terraform apply that changes nothing.
func BenchmarkReconcileNothingToChange(b *testing.B) {
	ns := env.Namespace(b)
	s := newShootIn(ns, "infrastructure", "10.250.0.0/19")
	benchInfrastructures(b, ns, 0) // the credentials
	counter := &requestCounter{}
	config := rest.CopyConfig(env.Config)
	config.Wrap(counter.wrap)
	startControllerWith(b, ns, filepath.Join(b.TempDir(), "runs"), config, benchConcurrency)
	if err := env.Client.Create(context.Background(), s.infra); err != nil {
		b.Fatal(err)
	}
	waitOperation(b, s, extensionsv1alpha1.LastOperationTypeCreate)
	counter.reset()
	cpuBefore := selfCPU()
	for b.Loop() {
		s.reconciled(b)
	}
	b.ReportMetric(float64(counter.count.Load())/float64(b.N), "api-requests/op")
	// The controller's own CPU time (this process, terraform and the API server apart),
	// which other load on the machine does not change as it changes the elapsed time.
	b.ReportMetric((selfCPU()-cpuBefore).Seconds()*1000/float64(b.N), "controller-cpu-ms/op")
}

// selfCPU is the CPU time this process has used, user and system.
func selfCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// waitOperation waits until an operation asked for is taken (its annotation gone) and
// succeeded.
func waitOperation(b *testing.B, s *shoot, opType extensionsv1alpha1.LastOperationType) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		infra := &extensionsv1alpha1.Infrastructure{}
		if err := env.Client.Get(context.Background(), s.key(), infra); err != nil {
			b.Fatal(err)
		}
		_, asked := infra.Annotations[extension.AnnotationOperation]
		if last := infra.Status.LastOperation; !asked && last != nil && last.Type == opType && last.State == extensionsv1alpha1.LastOperationStateSucceeded {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("%s did not succeed", opType)
}
