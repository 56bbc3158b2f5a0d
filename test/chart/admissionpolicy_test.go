package chart

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
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
	for _, ns := range []string{shoot, other, release} {
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
	g.Expect(controller.Create(ctx, pod(release, "bucket.backupbucket.tf-run", "terraseed-terraformer", image))).To(Succeed(), "a run pod of a BackupBucket, in the release's namespace")
	selected := pod(release, "selected.backupbucket.tf-run", "terraseed-terraformer", image)
	selected.Labels = map[string]string{"app.kubernetes.io/name": "terraseed", "app.kubernetes.io/instance": "terraseed"}
	g.Expect(controller.Create(ctx, selected)).To(MatchError(ContainSubstring("but run pods the Service does not select")), "a run pod the webhook's Service would send calls to")
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

// With stateStorage secret a run pod creates Secrets under its state parts' names and reads
// them back. A Secret of type kubernetes.io/service-account-token naming a ServiceAccount of
// its namespace would be filled with that ServiceAccount's token: tried as the run pod,
// <release>-terraformer-run-objects admits Opaque Secrets only (an untyped one is Opaque by
// the time it is admitted) and no service-account annotations, created or updated.
func TestRunPodsMintNoTokens(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	installRenamed(t, "run-tokens-", release)
	shoot := env.LabelledNamespace(t, shootLabels)
	e := &executor.PodExecutor{Client: impersonate(t, release, "terraseed"), ServiceAccountName: "terraseed-terraformer", State: state.Options{Storage: state.StorageSecret}}
	g.Expect(e.EnsureServiceAccount(ctx, run.ID{Namespace: shoot, Name: "infra", Purpose: run.PurposeInfra})).To(Succeed())
	terraformer := impersonateRunPod(t, shoot, "infra.infra.tf-run")
	g.Eventually(func() error {
		return terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "probe"}}, client.DryRunAll)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("the run pods create only the run objects")))

	const part = "infra.infra.tf-state.a-1"
	serviceAccount := map[string]string{corev1.ServiceAccountNameKey: "default"}
	g.Expect(terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: part, Annotations: serviceAccount},
		Type: corev1.SecretTypeServiceAccountToken})).To(MatchError(ContainSubstring(
		"the run pods write only Secrets of type Opaque, not kubernetes.io/service-account-token " + part)))
	g.Expect(terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: part, Annotations: serviceAccount},
		Type: corev1.SecretTypeOpaque})).To(MatchError(ContainSubstring(
		"the run pods write no kubernetes.io/service-account.* annotations: Secret " + part + " has kubernetes.io/service-account.name")))
	g.Expect(terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: part},
		Type: "example.com/other"})).To(MatchError(ContainSubstring("the run pods write only Secrets of type Opaque, not example.com/other")))

	// What the run pod writes: the state as an Opaque Secret, a part without a type.
	g.Expect(terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infra.infra.tf-state"},
		Type: corev1.SecretTypeOpaque})).To(Succeed())
	written := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: part}, Data: map[string][]byte{"part": []byte("1")}}
	g.Expect(terraformer.Create(ctx, written)).To(Succeed())
	g.Expect(written.Type).To(Equal(corev1.SecretTypeOpaque))
	// Updated, it takes no service-account annotation either; its data it may change.
	written.Annotations = map[string]string{"kubernetes.io/service-account.uid": "0"}
	g.Expect(terraformer.Update(ctx, written)).To(MatchError(ContainSubstring(
		"the run pods write no kubernetes.io/service-account.* annotations: Secret " + part + " has kubernetes.io/service-account.uid")))
	g.Expect(terraformer.Get(ctx, client.ObjectKeyFromObject(written), written)).To(Succeed())
	written.Data["part"] = []byte("2")
	g.Expect(terraformer.Update(ctx, written)).To(Succeed())
}
