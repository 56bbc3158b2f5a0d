package e2e

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/test/realnode"
	"github.com/terraseed/terraseed/test/testenv"
)

// With the chart's tracing.endpoint naming an OTLP/HTTP receiver the node's pods reach, a
// create through a run pod is one trace: the controller pod's reconcile, slot, run and
// the run pod's creation and start, and the spans the run pod's terraformer sent itself
// (its terraform apply and state saves) as children of the run. The event of the
// create's start names the trace.
func TestACreateThroughARunPodIsOneTrace(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := context.Background()
	listener, err := net.Listen("tcp", realnode.HostIP+":0")
	g.Expect(err).NotTo(HaveOccurred())
	receiver := testenv.ServeTraceReceiver(t, listener)
	setTracingEndpoint(t, receiver.URL)
	t.Cleanup(func() { setTracingEndpoint(t, "") })

	s := newShoot(t, adminKubeconfig(t), "10.250.0.0/19")
	s.create(t)
	s.waitSucceeded(t, extensionsv1alpha1.LastOperationTypeCreate)
	var traceID string
	g.Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(kube.List(ctx, list, client.InNamespace(s.namespace))).To(Succeed())
		for _, e := range list.Items {
			if m := traceInNote.FindStringSubmatch(e.Note); e.Regarding.Name == infraName && e.Reason == "CreateProcessing" && m != nil {
				traceID = m[1]
			}
		}
		g.Expect(traceID).NotTo(BeEmpty(), "the event of the create's start names its trace")
	}).WithTimeout(quickAction).Should(Succeed())

	// The controller sends its spans in batches, every 5s.
	g.Eventually(func(g Gomega) {
		byName := map[string][]testenv.Span{}
		for _, span := range receiver.Trace(traceID) {
			byName[span.Name] = append(byName[span.Name], span)
		}
		for _, name := range []string{"reconcile", "render", "slot", "run", "pod.create", "pod.start", "pod.end", "terraformer", "terraform.apply", "state.save"} {
			g.Expect(byName).To(HaveKey(name))
		}
		reconcile, run, terraformer := byName["reconcile"][0], byName["run"][0], byName["terraformer"][0]
		g.Expect(reconcile.ParentSpanID).To(BeEmpty())
		g.Expect(reconcile.Service).To(Equal("terraseed"))
		g.Expect(byName["slot"][0].ParentSpanID).To(Equal(reconcile.SpanID))
		g.Expect(run.ParentSpanID).To(Equal(reconcile.SpanID))
		g.Expect(run.Attributes).To(HaveKeyWithValue("terraseed.executor", "pod"))
		g.Expect(byName["pod.create"][0].ParentSpanID).To(Equal(run.SpanID))
		// The run pod's own spans.
		g.Expect(terraformer.Service).To(Equal("terraseed-terraformer"))
		g.Expect(terraformer.ParentSpanID).To(Equal(run.SpanID))
		g.Expect(byName["terraform.apply"][0].ParentSpanID).To(Equal(terraformer.SpanID))
		for _, save := range byName["state.save"] {
			g.Expect(save.ParentSpanID).To(Equal(terraformer.SpanID))
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

var traceInNote = regexp.MustCompile(`\(trace ([0-9a-f]{32})\)$`)

// setTracingEndpoint upgrades the chart's release with tracing.endpoint set to endpoint
// (empty: off), keeping its other values, and waits for the controller to roll out.
func setTracingEndpoint(t *testing.T, endpoint string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := helm(ctx, "upgrade", releaseName, filepath.Join(repoRoot, "charts", "terraseed"),
		"--namespace", releaseNamespace, "--reuse-values", "--set", "tracing.endpoint="+endpoint, "--wait", "--timeout", "10m")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	waitControllerAvailable(t)
}
