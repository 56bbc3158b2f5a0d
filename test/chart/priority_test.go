package chart

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gardenerControlPlaneFloor is the value of gardener-system-100, the lowest of the
// PriorityClasses Gardener gives the shoots' control planes on a seed (gardener-system-500
// for etcd and kube-apiserver down to gardener-system-100 for their monitoring).
const gardenerControlPlaneFloor = 999998100

// The run pods' PriorityClass the chart creates (as the Gardener example asks for it)
// lies below every shoot control plane's class and preempts nothing: one tenant's runs
// never evict another tenant's control plane, nor anything else. The API server admits it
// as rendered, and a pod of it, as the run pods are, gets its priority with preemption
// policy Never; a value at or above the control planes' is refused when rendering.
func TestRunPodPriorityPreemptsNoControlPlane(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	name := "runs-" + release
	objects := render(t, release, "--set", "terraformer.priorityClassName="+name, "--set", "terraformer.createPriorityClass=true")
	class := convert[schedulingv1.PriorityClass](t, find(objects, "PriorityClass", name))
	g.Expect(class.Value).To(BeNumerically("<", gardenerControlPlaneFloor), "below every shoot control plane")
	g.Expect(class.Value).To(BeNumerically(">", 0), "above the seed's unprioritised workloads, which it is placed before")
	g.Expect(class.PreemptionPolicy).To(HaveValue(Equal(corev1.PreemptNever)), "preempting nothing")
	g.Expect(class.GlobalDefault).To(BeFalse())
	_, c := controllerContainer(t, objects)
	g.Expect(c.Args).To(ContainElement("--terraformer-priority-class-name=" + name))

	g.Expect(env.Client.Create(ctx, class)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) })
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "run"},
		Spec:       corev1.PodSpec{PriorityClassName: name, Containers: []corev1.Container{{Name: "terraformer", Image: "terraseed"}}},
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	g.Expect(pod.Spec.Priority).To(Equal(ptr.To(class.Value)))
	g.Expect(pod.Spec.PreemptionPolicy).To(HaveValue(Equal(corev1.PreemptNever)))

	_, err := helm(t, "template", "terraseed", chartDir, "--set", "terraformer.priorityClassName="+name,
		"--set", "terraformer.createPriorityClass=true", "--set", "terraformer.priorityClassValue=999998100")
	g.Expect(err).To(MatchError(ContainSubstring("terraformer.priorityClassValue: 999998100 must lie below 999998100 (gardener-system-100)")))
	g.Expect(find(render(t, release), "PriorityClass", "")).To(BeNil(), "none unless asked for")
}
