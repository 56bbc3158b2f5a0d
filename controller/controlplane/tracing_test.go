package controlplane_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/test/testenv"
)

// A ControlPlane's reconcile is a trace as an Infrastructure's is: its root names the
// kind, and the rendering of the objects and the status writes are its children.
func TestAControlPlanesReconcileIsATrace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	receiver, flush := testenv.StartTracing(t)

	cp := newControlPlane(t, "pruning", `{}`)
	startController(t, cp.Namespace)
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	waitFor(t, cp, extensionsv1alpha1.LastOperationTypeCreate)
	g.Expect(flush(ctx)).To(Succeed())

	var create testenv.Span
	for _, span := range receiver.Spans() {
		if span.Name == "reconcile" && span.Attributes["terraseed.kind"] == "ControlPlane" && span.Attributes["terraseed.operation"] == "Create" &&
			span.Attributes["terraseed.namespace"] == cp.Namespace {
			create = span
		}
	}
	g.Expect(create.TraceID).NotTo(BeEmpty(), "the create's reconcile: %s", testenv.FormatTrace(receiver.Spans()))
	g.Expect(create.ParentSpanID).To(BeEmpty())
	g.Eventually(func() []testenv.Span { return receiver.Trace(create.TraceID) }).WithTimeout(10 * time.Second).Should(ContainElements(
		And(HaveField("Name", "render"), HaveField("ParentSpanID", create.SpanID)),
		And(HaveField("Name", "status"), HaveField("ParentSpanID", create.SpanID))))
}
