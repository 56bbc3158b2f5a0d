package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/test/realnode"
)

// controlPlaneConfig is a local ControlPlaneConfig whose cloud-controller-manager runs image.
func controlPlaneConfig(image string) *runtime.RawExtension {
	return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"replicas":1,"image":"` + image + `"}}`)}
}

func controlPlaneHealth(g Gomega, key client.ObjectKey) extensionsv1alpha1.Condition {
	cp := &extensionsv1alpha1.ControlPlane{}
	g.Expect(kube.Get(context.Background(), key, cp)).To(Succeed())
	for _, c := range cp.Status.Conditions {
		if c.Type == "ControlPlaneHealthy" {
			return c
		}
	}
	g.Expect(cp.Status.Conditions).To(ContainElement(HaveField("Type", BeEquivalentTo("ControlPlaneHealthy"))))
	return extensionsv1alpha1.Condition{}
}

// The controller the chart installed deploys a local ControlPlane whose pod the node's
// kubelet runs: ControlPlaneHealthy turns True once the pod is available, False while a
// rollout to an image the node cannot pull is stuck, and True again once it is undone.
func TestControlPlaneHealthFollowsTheNode(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"}, Data: map[string][]byte{"kubeconfig": []byte("unused")}}
	g.Expect(kube.Create(ctx, secret)).To(Succeed())
	cp := &extensionsv1alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control-plane"},
		Spec: extensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: controlPlaneConfig(realnode.PauseImage)},
			Region:      "local-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
			InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"InfrastructureStatus","namespace":"` + ns + `--infrastructure","zones":[{"name":"zone-a","workers":"10.250.0.0/19"}]}`)},
		},
	}
	g.Expect(kube.Create(ctx, cp)).To(Succeed())
	key := client.ObjectKeyFromObject(cp)
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), cp)
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(kube.Get(context.Background(), key, &extensionsv1alpha1.ControlPlane{}))
		}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(BeTrue(), "the ControlPlane is deleted")
	})

	// The kubelet runs the pod: the Deployment becomes available, and the condition True.
	g.Eventually(func(g Gomega) {
		c := controlPlaneHealth(g, key)
		g.Expect(c.Status).To(Equal(extensionsv1alpha1.ConditionTrue), "%+v", c)
		g.Expect(c.Reason).To(Equal("HealthCheckSuccessful"))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
	pods := &corev1.PodList{}
	g.Expect(kube.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "cloud-controller-manager"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning), "a real pod runs")
	g.Expect(pods.Items[0].Labels).To(HaveKeyWithValue("networking.gardener.cloud/to-dns", "allowed"))

	// An image no registry serves: the new pod cannot start, the rollout is stuck.
	g.Eventually(func(g Gomega) {
		current := &extensionsv1alpha1.ControlPlane{}
		g.Expect(kube.Get(ctx, key, current)).To(Succeed())
		current.Spec.ProviderConfig = controlPlaneConfig("localhost/terraseed/no-such-image:1")
		g.Expect(kube.Update(ctx, current)).To(Succeed())
	}).WithTimeout(quickAction).Should(Succeed())
	g.Eventually(func(g Gomega) {
		c := controlPlaneHealth(g, key)
		g.Expect(c.Status).To(Equal(extensionsv1alpha1.ConditionFalse), "%+v", c)
		g.Expect(c.Reason).To(Equal("HealthCheckUnsuccessful"))
		g.Expect(c.Message).To(ContainSubstring("Deployment cloud-controller-manager"))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())

	// Back to the image the node has: available again.
	g.Eventually(func(g Gomega) {
		current := &extensionsv1alpha1.ControlPlane{}
		g.Expect(kube.Get(ctx, key, current)).To(Succeed())
		current.Spec.ProviderConfig = controlPlaneConfig(realnode.PauseImage)
		g.Expect(kube.Update(ctx, current)).To(Succeed())
	}).WithTimeout(quickAction).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(controlPlaneHealth(g, key).Status).To(Equal(extensionsv1alpha1.ConditionTrue))
		d := &appsv1.Deployment{}
		g.Expect(kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cloud-controller-manager"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(1))
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
}
