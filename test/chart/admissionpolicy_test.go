package chart

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The controller may create pods in every namespace; the chart's ValidatingAdmissionPolicy
// holds it, on the real kube-apiserver, to run pods: the terraformer's ServiceAccount and
// image, in a shoot namespace. Others, such as an administrator, are not held.
func TestAdmissionPolicyHoldsTheControllersPodsToRunPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	// Cluster-scoped objects get names of their own, apart from the other tests' releases.
	for _, o := range render(t, release) {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			o.SetName("policy-" + o.GetName())
		}
		switch o.GetKind() {
		case "ClusterRoleBinding":
			o.Object["roleRef"].(map[string]any)["name"] = o.GetName()
		case "ValidatingAdmissionPolicyBinding":
			o.Object["spec"].(map[string]any)["policyName"] = o.GetName()
		}
		g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		if o.GetNamespace() == "" {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
	}
	// Labelled when created: a label patched on later reaches the policies a moment after.
	shoot, other := env.LabelledNamespace(t, shootLabels), env.Namespace(t)
	for _, ns := range []string{shoot, other} {
		g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "terraseed-terraformer"}})).To(Succeed())
	}
	pod := func(ns, name, account, image string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.PodSpec{ServiceAccountName: account, Containers: []corev1.Container{{Name: "terraformer", Image: image}}},
		}
	}
	const image = "ghcr.io/terraseed/terraseed:0.1.0"
	controller := impersonate(t, release, "terraseed")

	// The policy is in force once the API server loaded it.
	g.Eventually(func() error {
		return controller.Create(ctx, pod(shoot, "probe", "terraseed-terraformer", "example.com/other:1"), client.DryRunAll)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("the terraformer image " + image + " only")))

	g.Expect(controller.Create(ctx, pod(shoot, "infra.infra.tf-run", "terraseed-terraformer", image))).To(Succeed(), "a run pod")
	g.Expect(controller.Create(ctx, pod(shoot, "other-image", "terraseed-terraformer", "example.com/miner:1"))).To(MatchError(ContainSubstring("the terraformer image " + image + " only")))
	g.Expect(controller.Create(ctx, pod(shoot, "other-account", "default", image))).To(MatchError(ContainSubstring("the ServiceAccount terraseed-terraformer only, not default")))
	// Refused by this policy and by <release>-controller-writes, whichever answers first.
	g.Expect(controller.Create(ctx, pod(other, "elsewhere", "terraseed-terraformer", image))).To(MatchError(ContainSubstring("namespaces labelled gardener.cloud/role=shoot")))
	withInit := pod(shoot, "other-init", "terraseed-terraformer", image)
	withInit.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "example.com/miner:1"}}
	g.Expect(controller.Create(ctx, withInit)).To(MatchError(ContainSubstring("the terraformer image " + image + " only")))

	// Whoever else creates pods is not held by it.
	g.Expect(env.Client.Create(ctx, pod(other, "by-an-admin", "default", "example.com/other:1"))).To(Succeed())
}
