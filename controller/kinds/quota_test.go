package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/executor"
)

// With the pod executor, a create whose run pod the namespace's ResourceQuota refuses
// does not fail: the operation goes on processing and lastOperation.description says why
// it waits; once the quota has room, the run pod is created. envtest runs no quota
// controller: the test writes the usage the API server's quota admission checks against.
func TestACreateWhoseRunPodAQuotaRefusesWaitsSayingSo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	retry := executor.NotStartedRetry
	executor.NotStartedRetry = time.Second
	t.Cleanup(func() { executor.NotStartedRetry = retry })

	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "shoot"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}}}
	g.Expect(env.Client.Create(ctx, quota)).To(Succeed())
	patch := client.MergeFrom(quota.DeepCopy())
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}}
	g.Expect(env.Client.Status().Patch(ctx, quota, patch)).To(Succeed())

	clientset, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) {
		a.Executor = &executor.PodExecutor{Client: a.Client, Clientset: clientset, Image: "terraseed/terraformer:test", ManageServiceAccount: true}
	})
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		g.Expect(infra.Status.LastOperation).NotTo(BeNil())
		g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateProcessing), "last operation: %+v, last error: %+v", infra.Status.LastOperation, infra.Status.LastError)
		g.Expect(infra.Status.LastOperation.Description).To(And(
			ContainSubstring("waiting to start again in a moment: the run pod is refused by a ResourceQuota"),
			ContainSubstring("exceeded quota: shoot")))
		g.Expect(infra.Status.LastError).To(BeNil(), "no failure")
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

	patch = client.MergeFrom(quota.DeepCopy())
	quota.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}
	g.Expect(env.Client.Status().Patch(ctx, quota, patch)).To(Succeed())
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "infrastructure.infra.tf-run"}, &corev1.Pod{})
	}).WithTimeout(time.Minute).Should(Succeed(), "the run pod is created once the quota has room")
}
