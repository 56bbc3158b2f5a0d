package controlplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
)

// observed is what one watch event showed of a ControlPlane.
type observed struct {
	annotation string
	opType     extensionsv1alpha1.LastOperationType
	state      extensionsv1alpha1.LastOperationState
}

func (o observed) String() string {
	return fmt.Sprintf("{annotation %q, lastOperation %s %s}", o.annotation, o.opType, o.state)
}

// TestTheReconcileRequestGoesBeforeProcessing asks for a reconcile as Gardener does and
// reads, in order, every version of the ControlPlane the API server stored: Gardener's
// request is gone before lastOperation says Processing, and no version shows both
// (Gardener's extension library removes it first, too).
func TestTheReconcileRequestGoesBeforeProcessing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "local", localConfig(1))
	startController(t, cp.Namespace)
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	created := waitFor(t, cp, extensionsv1alpha1.LastOperationTypeCreate)

	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	watchCtx, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	w, err := watching.Watch(watchCtx, &extensionsv1alpha1.ControlPlaneList{}, client.InNamespace(cp.Namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: created.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	annotate(g, cp, extension.OperationReconcile)

	var events []observed
	for {
		e, ok := <-w.ResultChan()
		if !ok {
			t.Fatalf("the watch ended before the reconcile succeeded; events: %v", events)
		}
		obj, ok := e.Object.(*extensionsv1alpha1.ControlPlane)
		g.Expect(ok).To(BeTrue(), "a ControlPlane, got %v", e.Object)
		o := observed{annotation: obj.Annotations[extension.AnnotationOperation]}
		if last := obj.Status.LastOperation; last != nil {
			o.opType, o.state = last.Type, last.State
		}
		events = append(events, o)
		if o.opType == extensionsv1alpha1.LastOperationTypeReconcile && o.state == extensionsv1alpha1.LastOperationStateSucceeded {
			break
		}
	}

	requested, taken, processing := -1, -1, -1
	for i, o := range events {
		g.Expect(o.annotation != "" && o.state == extensionsv1alpha1.LastOperationStateProcessing).To(BeFalse(),
			"event %d shows Gardener's request and the operation under way at once: %v", i, events)
		switch {
		case requested < 0 && o.annotation == extension.OperationReconcile:
			requested = i
		case requested >= 0 && taken < 0 && o.annotation == "":
			taken = i
		}
		if processing < 0 && o.state == extensionsv1alpha1.LastOperationStateProcessing {
			processing = i
		}
	}
	g.Expect(requested).To(BeNumerically(">=", 0), "the request is seen: %v", events)
	g.Expect(processing).To(BeNumerically(">", requested), "the operation is seen under way: %v", events)
	g.Expect(taken).To(BeNumerically(">", requested), "the request is taken: %v", events)
	g.Expect(taken).To(BeNumerically("<", processing), "the request is taken before the operation is under way: %v", events)
	g.Expect(events[len(events)-1].annotation).To(BeEmpty())
}

// TestATakenRequestIsNotLostWhenTheStatusCannotBeWritten takes Gardener's request while
// the API server refuses every status write of the namespace's ControlPlanes: once it
// accepts them again, the reconcile Gardener asked for runs, though the request is gone
// and the object looks up to date.
func TestATakenRequestIsNotLostWhenTheStatusCannotBeWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "local", localConfig(1))
	startController(t, cp.Namespace)
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())
	waitFor(t, cp, extensionsv1alpha1.LastOperationTypeCreate)

	unhold := holdStatusWrites(t, cp.Namespace)
	g.Eventually(func() error {
		probe := get(g, cp)
		patch := client.MergeFrom(probe.DeepCopy())
		probe.Status.Conditions = append(probe.Status.Conditions, extensionsv1alpha1.Condition{
			Type: "Probe", Status: "True", Reason: "Probe", LastTransitionTime: metav1.Now(), LastUpdateTime: metav1.Now()})
		return env.Client.Status().Patch(ctx, probe, patch, client.DryRunAll)
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(MatchError(ContainSubstring("status writes are held")), "the policy is in force")

	annotate(g, cp, extension.OperationReconcile)
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, cp).Annotations).NotTo(HaveKey(extension.AnnotationOperation))
	}).WithTimeout(timeout).Should(Succeed(), "the request is taken")
	// Meanwhile the operation cannot be marked Processing, and fails without a trace.
	time.Sleep(2 * time.Second)
	g.Expect(get(g, cp).Status.LastOperation.Type).To(Equal(extensionsv1alpha1.LastOperationTypeCreate))

	unhold()
	waitFor(t, cp, extensionsv1alpha1.LastOperationTypeReconcile)
}

// holdStatusWrites has the API server refuse every status write of ControlPlanes in
// namespace until the returned function is called.
func holdStatusWrites(t *testing.T, namespace string) (unhold func()) {
	t.Helper()
	ctx := context.Background()
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-status-" + namespace},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{
						APIGroups: []string{extensionsv1alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"controlplanes/status"},
					},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "status writes are held by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace},
			}},
		},
	}
	g := NewWithT(t)
	g.Expect(env.Client.Create(ctx, policy)).To(Succeed())
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	unhold = func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), policy)
	}
	t.Cleanup(unhold)
	return unhold
}
