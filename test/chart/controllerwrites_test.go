package chart

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var shootLabels = map[string]string{"gardener.cloud/role": "shoot"}

// installRenamed applies what the chart renders into release, its cluster-scoped objects
// (ClusterRoles and their bindings, webhook configurations, admission policies and their
// bindings) renamed with prefix, apart from the other tests' releases, and removed after
// the test; the ClusterRole names the renamed webhook configuration. It waits until the
// controller's admission policy is in force.
func installRenamed(t *testing.T, prefix, release string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	objects := render(t, release, args...)
	renameWebhookConfigurations(t, prefix, objects)
	for _, o := range objects {
		renamed := false
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			o.SetName(prefix + o.GetName())
			renamed = true
		}
		switch o.GetKind() {
		case "ClusterRoleBinding":
			o.Object["roleRef"].(map[string]any)["name"] = o.GetName()
		case "ValidatingAdmissionPolicyBinding":
			o.Object["spec"].(map[string]any)["policyName"] = o.GetName()
		}
		g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
		if renamed {
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
	}
	if find(objects, "ValidatingAdmissionPolicy", prefix+"terraseed-controller-writes") != nil {
		// In force once the API server loaded it: a ConfigMap outside the shoot namespaces.
		outside := env.Namespace(t)
		controller := impersonate(t, release, "terraseed")
		g.Eventually(func() error {
			return controller.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: outside, Name: "probe"}}, client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("the controller writes only in namespaces labelled")))
	}
	return objects
}

// renameWebhookConfigurations renames, in the ClusterRoles' resourceNames, the webhook
// configurations that installRenamed renames.
func renameWebhookConfigurations(t *testing.T, prefix string, objects []*unstructured.Unstructured) {
	t.Helper()
	renamed := map[string]bool{}
	for _, o := range objects {
		if o.GetKind() == "MutatingWebhookConfiguration" {
			renamed[o.GetName()] = true
		}
	}
	for _, o := range objects {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		rules, _, err := unstructured.NestedSlice(o.Object, "rules")
		if err != nil {
			t.Fatalf("ClusterRole %s: %v", o.GetName(), err)
		}
		for _, rule := range rules {
			names, _ := rule.(map[string]any)["resourceNames"].([]any)
			for i, name := range names {
				if s, _ := name.(string); renamed[s] {
					names[i] = prefix + s
				}
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, rules, "rules"); err != nil {
			t.Fatalf("ClusterRole %s: %v", o.GetName(), err)
		}
	}
}

// The controller's ClusterRole writes workloads, ServiceAccounts, Roles, RoleBindings,
// ConfigMaps, Secrets, ... in every namespace, and kube-controller-manager creates the
// workloads' pods under its own name. The chart's admission policy holds every write of the
// controller's ServiceAccount to shoot namespaces and its own, and its pod templates to
// what a control plane is; tried here object by object as that ServiceAccount.
func TestAdmissionPolicyHoldsTheControllersWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	installRenamed(t, "writes-", release)
	controller := impersonate(t, release, "terraseed")
	shoot, other := env.LabelledNamespace(t, shootLabels), env.Namespace(t)

	deployment := func(ns, name string, mutate func(*corev1.PodSpec)) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "aws-custom-route-controller",
						Containers:         []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
					},
				},
			},
		}
		if mutate != nil {
			mutate(&d.Spec.Template.Spec)
		}
		return d
	}
	daemonSet := func(ns, name string, mutate func(*corev1.PodSpec)) *appsv1.DaemonSet {
		d := deployment(ns, name, mutate)
		return &appsv1.DaemonSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
	}
	security := func(sc *corev1.SecurityContext) func(*corev1.PodSpec) {
		return func(p *corev1.PodSpec) { p.Containers[0].SecurityContext = sc }
	}

	// What a control plane is, in a shoot namespace, and the controller's own namespace.
	g.Expect(controller.Create(ctx, deployment(shoot, "route-controller", nil))).To(Succeed())
	g.Expect(controller.Create(ctx, deployment(shoot, "without-token", func(p *corev1.PodSpec) {
		p.ServiceAccountName, p.AutomountServiceAccountToken = "", ptr.To(false)
	}))).To(Succeed(), "a pod of no ServiceAccount the providers render, without its token")
	g.Expect(controller.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "cloud-provider-config"}})).To(Succeed())
	g.Expect(controller.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "runs-elsewhere"}})).To(Succeed(), "in its own namespace")
	g.Expect(controller.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "aws-custom-route-controller"}})).To(Succeed())
	// A BackupBucket's generated Secret in garden, and nothing else there.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bucketSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "generated-bucket-" + release}}
	g.Expect(controller.Create(ctx, bucketSecret)).To(Succeed(), "a BackupBucket's generated Secret")
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucketSecret) })
	err := controller.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "cloudprovider-" + release}})
	g.Expect(err).To(MatchError(ContainSubstring("Secret garden/cloudprovider-"+release+": the controller writes only in namespaces labelled")), "another Secret in garden")
	// The events of a cluster-scoped BackupBucket, recorded in default, and nothing else there.
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "bucket-" + release},
		InvolvedObject: corev1.ObjectReference{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "BackupBucket", Name: release},
		Reason:         "Reconciled", Message: "the BackupBucket is reconciled", Type: corev1.EventTypeNormal,
	}
	g.Expect(controller.Create(ctx, event)).To(Succeed(), "an event of a cluster-scoped object")
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), event) })
	err = controller.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x-" + release}})
	g.Expect(err).To(MatchError(ContainSubstring("not in default")), "a ConfigMap in default")

	for _, c := range []struct {
		what string
		obj  client.Object
		want string
	}{
		// Outside the shoot namespaces: whatever the kind.
		{"a DaemonSet in kube-system", daemonSet("kube-system", "miner", nil), "DaemonSet kube-system/miner: the controller writes only in namespaces labelled gardener.cloud/role=shoot and in its own, " + release + ", and the generated Secrets of BackupBuckets in garden, not in kube-system"},
		{"a Deployment in another namespace", deployment(other, "miner", nil), "not in " + other},
		{"a ConfigMap in another namespace", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "x"}}, "ConfigMap " + other + "/x: the controller writes only in namespaces labelled"},
		{"a Secret in kube-system", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "x"}}, "not in kube-system"},
		{"a ServiceAccount in another namespace", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "aws-custom-route-controller"}}, "not in " + other},
		{"a Role in another namespace", &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "x"}}, "not in " + other},
		// Pod templates in a shoot namespace.
		{"a privileged container", daemonSet(shoot, "privileged", security(&corev1.SecurityContext{Privileged: ptr.To(true)})),
			"DaemonSet " + shoot + "/privileged: spec.template.spec: container main: securityContext: the controller writes no privileged containers"},
		{"privilege escalation", deployment(shoot, "escalation", security(&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)})), "container main: securityContext"},
		{"an added capability", deployment(shoot, "capability", security(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}})), "container main: securityContext"},
		{"a privileged init container", deployment(shoot, "init", func(p *corev1.PodSpec) {
			p.InitContainers = []corev1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}), "container init: securityContext"},
		{"the host's network", daemonSet(shoot, "host-network", func(p *corev1.PodSpec) { p.HostNetwork = true }), "spec.template.spec.hostNetwork: the controller writes no pods in the host namespaces"},
		{"the host's PIDs", deployment(shoot, "host-pid", func(p *corev1.PodSpec) { p.HostPID = true }), "spec.template.spec.hostPID"},
		{"the host's IPC", deployment(shoot, "host-ipc", func(p *corev1.PodSpec) { p.HostIPC = true }), "spec.template.spec.hostIPC"},
		{"a hostPath", daemonSet(shoot, "host-path", func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}), "spec.template.spec.volumes: volume root is a hostPath"},
		{"a hostPort", deployment(shoot, "host-port", func(p *corev1.PodSpec) {
			p.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 22, HostPort: 22}}
		}), "container main: ports: the controller writes no pods with a hostPort"},
		{"another image", deployment(shoot, "image", func(p *corev1.PodSpec) { p.Containers[0].Image = "example.com/miner:1" }),
			"spec.template.spec: container main: image is not under a prefix of controlPlane.allowedImages"},
		{"a registry named like an allowed one", deployment(shoot, "lookalike", func(p *corev1.PodSpec) {
			p.Containers[0].Image = "registry.k8s.io.attacker.example/pause:3.10"
		}), "container main: image is not under a prefix"},
		{"gardenlet's ServiceAccount", deployment(shoot, "gardenlet", func(p *corev1.PodSpec) { p.ServiceAccountName = "gardenlet" }),
			"spec.template.spec.serviceAccountName: gardenlet is not a ServiceAccount of controlPlane.serviceAccounts"},
		{"the default ServiceAccount's token", deployment(shoot, "default-token", func(p *corev1.PodSpec) { p.ServiceAccountName = "" }),
			"serviceAccountName: default is not a ServiceAccount"},
		{"a projected token", deployment(shoot, "projected", func(p *corev1.PodSpec) {
			p.ServiceAccountName, p.AutomountServiceAccountToken = "gardener-resource-manager", ptr.To(false)
			p.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
		}), "serviceAccountName: gardener-resource-manager is not a ServiceAccount"},
		// ServiceAccounts and bindings.
		{"another ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "gardenlet"}},
			"ServiceAccount " + shoot + "/gardenlet: the controller writes only the ServiceAccounts"},
		{"a binding to a user", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "aws-custom-route-controller"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "aws-custom-route-controller"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}},
			"subjects: the controller binds only the ServiceAccounts"},
		{"a binding to another namespace's ServiceAccount", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "aws-custom-route-controller"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "aws-custom-route-controller"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: other, Name: "aws-custom-route-controller"}}},
			"subjects: the controller binds only the ServiceAccounts"},
	} {
		g.Expect(controller.Create(ctx, c.obj)).To(MatchError(ContainSubstring(c.want)), c.what)
	}

	// An update is held as a create is: a Deployment made harmless turns privileged.
	d := &appsv1.Deployment{}
	g.Expect(controller.Get(ctx, client.ObjectKey{Namespace: shoot, Name: "route-controller"}, d)).To(Succeed())
	d.Spec.Template.Spec.HostPID = true
	g.Expect(controller.Update(ctx, d)).To(MatchError(ContainSubstring("spec.template.spec.hostPID")))
	// Deleting outside the shoot namespaces is a write too.
	victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "victim"}}
	g.Expect(env.Client.Create(ctx, victim)).To(Succeed())
	g.Expect(controller.Delete(ctx, victim)).To(MatchError(ContainSubstring("not in " + other)))

	// Whoever else writes is not held by it.
	g.Expect(env.Client.Create(ctx, daemonSet(other, "by-an-admin", func(p *corev1.PodSpec) { p.HostNetwork = true }))).To(Succeed())
}

// The controller writes Secrets in every shoot namespace and reads them back: a Secret of
// type kubernetes.io/service-account-token naming a ServiceAccount there would be filled
// with that ServiceAccount's token. Tried as the controller's ServiceAccount: refused by
// <release>-controller-writes, as a TokenRequest is but the run pods' (bound to a pod),
// which its RBAC grants for their ServiceAccount only, and which the policy refuses for
// others where controlPlane.resources would grant them.
func TestControllerMintsNoTokens(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	installRenamed(t, "tokens-", release)
	controller := impersonate(t, release, "terraseed")
	shoot := env.LabelledNamespace(t, shootLabels)
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "aws-custom-route-controller"}}
	g.Expect(env.Client.Create(ctx, account)).To(Succeed())

	// What it writes: Opaque Secrets (tf-vars, the credentials copy).
	g.Expect(controller.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infra.infra.tf-vars"}, Type: corev1.SecretTypeOpaque})).To(Succeed())
	g.Expect(controller.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infra.infra.credentials"}})).To(Succeed(), "untyped, Opaque")

	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "minted", Annotations: map[string]string{corev1.ServiceAccountNameKey: account.Name}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	g.Expect(controller.Create(ctx, token)).To(MatchError(ContainSubstring(
		"Secret " + shoot + "/minted: type: the controller writes no Secrets of type kubernetes.io/service-account-token")))
	// One already there (an administrator's) is not the controller's to change.
	g.Expect(env.Client.Create(ctx, token)).To(Succeed())
	g.Expect(controller.Get(ctx, client.ObjectKeyFromObject(token), token)).To(Succeed())
	token.Annotations["note"] = "changed"
	g.Expect(controller.Update(ctx, token)).To(MatchError(ContainSubstring("the controller writes no Secrets of type kubernetes.io/service-account-token")))

	// No TokenRequest but a run pod's: its RBAC holds serviceaccounts/token for the run
	// pods' ServiceAccount only...
	request := &authenticationv1.TokenRequest{}
	err := controller.SubResource("token").Create(ctx, account, request)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring(`cannot create resource "serviceaccounts/token"`)))
	// ...whose token it requests bound to a pod, which it stops working without; one bound
	// to nothing the policy refuses.
	runAccount := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "terraseed-terraformer"}}
	g.Expect(env.Client.Create(ctx, runAccount)).To(Succeed())
	runPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "run"}, Spec: corev1.PodSpec{
		ServiceAccountName: runAccount.Name, AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{Name: "terraformer", Image: "terraformer"}},
	}}
	g.Expect(env.Client.Create(ctx, runPod)).To(Succeed())
	bound := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: runPod.Name, UID: runPod.UID},
	}}
	g.Eventually(func() error { return controller.SubResource("token").Create(ctx, runAccount, bound) }).
		WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(bound.Status.Token).NotTo(BeEmpty())
	g.Expect(controller.SubResource("token").Create(ctx, runAccount, &authenticationv1.TokenRequest{})).To(MatchError(ContainSubstring(
		"ServiceAccount " + shoot + "/terraseed-terraformer: the controller requests tokens only of the ServiceAccount of the run pods, terraseed-terraformer, bound to a Pod")))
	// ...and should controlPlane.resources grant it, the policy refuses it.
	grant := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tokens-" + release},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: grant.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: grant.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: release, Name: "terraseed"}}}
	for _, o := range []client.Object{grant, binding} {
		g.Expect(env.Client.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	g.Eventually(func() error {
		return controller.SubResource("token").Create(ctx, account, &authenticationv1.TokenRequest{})
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring(
		"ServiceAccount " + shoot + "/aws-custom-route-controller: the controller requests tokens only of the ServiceAccount of the run pods, terraseed-terraformer, bound to a Pod")))
}
