package chart

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// install applies everything `helm template --include-crds` renders, as helm install would.
func install(t *testing.T, namespace string, args ...string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range render(t, namespace, append([]string{"--include-crds"}, args...)...) {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

func serviceAccountConfig(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

func impersonate(t *testing.T, namespace, name string) client.Client {
	t.Helper()
	c, err := client.New(serviceAccountConfig(namespace, name), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// impersonateRunPod is the run pods' ServiceAccount as the run pod pod uses it: its token,
// bound to the pod, names the pod to the API server.
func impersonateRunPod(t *testing.T, namespace, pod string) client.Client {
	t.Helper()
	cfg := serviceAccountConfig(namespace, "terraseed-terraformer")
	cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/pod-name": {pod}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	return fmt.Sprintf("%s %s %s/%s", a.verb, r, a.namespace, a.name)
}

// allowed asks the API server's authorizer, as the impersonated user, whether it may.
func allowed(t *testing.T, c client.Client, a access) bool {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name,
		},
	}}
	if err := c.Create(context.Background(), review); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	return review.Status.Allowed
}

// checkAccess asserts, for each access, the authorizer's answer for the impersonated user.
// The API server authorizes from a cache of the roles and bindings, which sees one just
// written a moment later: an access may take a while to be allowed, and the denials are
// asked for once every grant is seen.
func checkAccess(t *testing.T, c client.Client, can, cannot []access) {
	t.Helper()
	g := NewWithT(t)
	for _, a := range can {
		g.Eventually(func() bool { return allowed(t, c, a) }).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "should be allowed: %s", a)
	}
	for _, a := range cannot {
		g.Expect(allowed(t, c, a)).To(BeFalse(), "should be denied: %s", a)
	}
}

const ext = "extensions.gardener.cloud"

// The chart installs: CRDs established, RBAC applied, the Deployment created. Then the
// controller's ServiceAccount is impersonated: it does its job in a shoot namespace and
// nothing more; the terraformer's ServiceAccount, bound by the controller as the pod
// executor binds it, reaches its own runs' objects only.
func TestInstallAndLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	install(t, release)

	s := scheme.New()
	g.Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	admin, err := client.New(env.Config, client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{"infrastructures." + ext, "controlplanes." + ext, "clusters." + ext} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
		g.Expect(crd.Status.Conditions).To(ContainElement(And(
			HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
	}
	deployment := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: release, Name: "terraseed"}, deployment)).To(Succeed())
	g.Expect(deployment.Spec.Template.Spec.ServiceAccountName).To(Equal("terraseed"))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: release, Name: "terraseed"}, &corev1.ServiceAccount{})).To(Succeed())

	controller := impersonate(t, release, "terraseed")
	shoot, other := env.LabelledNamespace(t, shootLabels), env.Namespace(t)

	t.Run("controller", func(t *testing.T) {
		checkAccess(t, controller, []access{
			{"watch", ext, "infrastructures", "", shoot, ""},
			{"patch", ext, "infrastructures", "", shoot, "infra"},
			{"update", ext, "infrastructures", "status", shoot, "infra"},
			{"list", ext, "clusters", "", "", ""},
			{"watch", ext, "dnsrecords", "", shoot, ""},
			{"patch", ext, "dnsrecords", "status", shoot, "record"},
			{"watch", ext, "bastions", "", shoot, ""},
			{"patch", ext, "bastions", "status", shoot, "bastion"},
			{"watch", ext, "selfhostedshootexposures", "", shoot, ""},
			{"patch", ext, "selfhostedshootexposures", "status", shoot, "exposure"},
			{"watch", ext, "backupbuckets", "", "", ""},
			{"patch", ext, "backupbuckets", "status", "", "bucket"},
			{"patch", ext, "backupentries", "", "", "entry"},
			{"create", "", "secrets", "", "garden", ""},
			{"create", "", "secrets", "", shoot, ""},
			{"get", "", "namespaces", "", "", shoot},
			{"delete", "", "secrets", "", shoot, "infra.infra.tf-env"},
			{"create", "", "pods", "", shoot, ""},
			{"get", "", "pods", "log", shoot, "infra.infra.tf-run"},
			{"create", "", "events", "", shoot, ""},
			{"create", "events.k8s.io", "events", "", shoot, ""},
			{"create", "", "serviceaccounts", "", shoot, ""},
			{"create", "rbac.authorization.k8s.io", "rolebindings", "", shoot, ""},
			{"update", "", "serviceaccounts", "", shoot, "terraseed-terraformer"},
			{"create", "", "serviceaccounts", "token", shoot, "terraseed-terraformer"},
			{"create", "rbac.authorization.k8s.io", "roles", "", shoot, ""},
			{"update", "rbac.authorization.k8s.io", "roles", "", shoot, "terraseed-terraformer"},
			{"update", "rbac.authorization.k8s.io", "rolebindings", "", shoot, "terraseed-terraformer"},
			{"delete", "rbac.authorization.k8s.io", "rolebindings", "", shoot, "terraseed-terraformer"},
			{"update", "coordination.k8s.io", "leases", "", release, "terraseed-infrastructure-controller"},
			{"update", "coordination.k8s.io", "leases", "", release, "gardener-extension-heartbeat"},
			{"watch", ext, "controlplanes", "", shoot, ""},
			{"patch", ext, "controlplanes", "", shoot, "control-plane"},
			{"patch", ext, "controlplanes", "status", shoot, "control-plane"},
			// What the embedded providers' control planes render, applied server-side.
			{"create", "apps", "deployments", "", shoot, ""},
			{"delete", "apps", "deployments", "", shoot, "cloud-controller-manager"},
			{"watch", "apps", "statefulsets", "", "", ""},
			{"patch", "", "services", "", shoot, "cloud-controller-manager"},
			{"create", "", "serviceaccounts", "", shoot, ""},
			{"patch", "rbac.authorization.k8s.io", "rolebindings", "", shoot, "aws-custom-route-controller"},
			{"create", "policy", "poddisruptionbudgets", "", shoot, ""},
			// The control-plane webhook: its configuration and its certificate Secret.
			{"watch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", ""},
			{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "terraseed-controlplane"},
			{"update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "terraseed-controlplane"},
			{"update", "", "secrets", "", release, "terraseed-webhook-cert"},
		}, []access{
			{"create", ext, "infrastructures", "", shoot, ""},
			{"create", ext, "dnsrecords", "", shoot, ""},
			{"delete", ext, "backupbuckets", "", "", "bucket"},
			{"create", ext, "bastions", "", shoot, ""},
			{"create", ext, "selfhostedshootexposures", "", shoot, ""},
			{"create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", ""},
			{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "another-webhook"},
			{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "terraseed-controlplane"},
			{"create", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", ""},
			{"delete", ext, "infrastructures", "", shoot, "infra"},
			{"update", ext, "clusters", "", "", shoot},
			{"create", ext, "controlplanes", "", shoot, ""},
			{"update", "", "pods", "", shoot, "infra.infra.tf-run"},
			{"create", "", "pods", "exec", shoot, "infra.infra.tf-run"},
			{"deletecollection", "", "configmaps", "", shoot, ""},
			{"list", "", "namespaces", "", "", ""},
			{"watch", "", "namespaces", "", "", ""},
			{"update", "", "namespaces", "", "", shoot},
			{"create", "", "serviceaccounts", "token", shoot, "default"},
			{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "terraseed-terraformer"},
			{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "cluster-admin"},
			{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "terraseed-terraformer"},
			{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", ""},
			{"update", "coordination.k8s.io", "leases", "", shoot, "terraseed-infrastructure-controller"},
			{"update", "coordination.k8s.io", "leases", "", shoot, "gardener-extension-heartbeat"},
			{"list", "", "namespaces", "", "", ""},
			{"delete", "", "namespaces", "", "", shoot},
			{"list", "", "nodes", "", "", ""},
			{"delete", ext, "controlplanes", "", shoot, "control-plane"},
			{"create", "", "serviceaccounts", "token", shoot, "cloud-controller-manager"},
		})
	})

	t.Run("controller binds the terraformer role and nothing else", func(t *testing.T) {
		g := NewWithT(t)
		// What the pod executor does per shoot namespace, as the controller.
		e := &executor.PodExecutor{Client: controller, ServiceAccountName: "terraseed-terraformer"}
		g.Expect(e.EnsureServiceAccount(ctx, run.ID{Namespace: shoot, Name: "infra", Purpose: run.PurposeInfra})).To(Succeed())
		// RBAC lets anyone grant what they hold themselves; roles holding more are refused.
		// (admin and edit are aggregated by kube-controller-manager, which envtest does
		// not run, so they are empty here and not worth asking about.)
		for _, role := range []string{"cluster-admin", "system:kube-scheduler", "system:node"} {
			err := controller.Create(ctx, terraformerBinding(shoot, role))
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding %s: %v", role, err)
		}
		err := controller.Create(ctx, &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infra"}})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		g.Expect(apierrors.IsForbidden(controller.List(ctx, &corev1.NamespaceList{}))).To(BeTrue())
	})

	// A ServiceAccount and a RoleBinding that were there before (made by hand, or by an
	// older release with another role) are corrected by the controller with the chart's
	// rights, not refused forever.
	t.Run("controller corrects the terraformer's ServiceAccount and RoleBinding", func(t *testing.T) {
		g := NewWithT(t)
		e := &executor.PodExecutor{Client: controller, ServiceAccountName: "terraseed-terraformer"}
		// Another role (as the ClusterRole of older releases): the binding is replaced.
		replaced := env.LabelledNamespace(t, shootLabels)
		g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: replaced, Name: "terraseed-terraformer"}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: replaced, Name: "terraseed-terraformer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "terraseed-terraformer"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: replaced, Name: "terraseed-terraformer"}},
		})).To(Succeed())
		// The same role, other subjects: the binding is updated.
		updated := env.LabelledNamespace(t, shootLabels)
		g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: updated, Name: "terraseed-terraformer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "terraseed-terraformer"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: updated, Name: "someone-else"}},
		})).To(Succeed())
		for _, ns := range []string{replaced, updated} {
			g.Expect(e.EnsureServiceAccount(ctx, run.ID{Namespace: ns, Name: "infra", Purpose: run.PurposeInfra})).To(Succeed(), "in namespace %s", ns)
			sa := &corev1.ServiceAccount{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "terraseed-terraformer"}, sa)).To(Succeed())
			g.Expect(sa.Labels).To(HaveKeyWithValue("terraseed.gardener.cloud/purpose", "terraformer"))
			binding := &rbacv1.RoleBinding{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "terraseed-terraformer"}, binding)).To(Succeed())
			g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "terraseed-terraformer"}))
			g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "terraseed-terraformer"}))
		}
	})

	t.Run("terraformer", func(t *testing.T) {
		g := NewWithT(t)
		terraformer := impersonateRunPod(t, shoot, "infra.infra.tf-run")
		checkAccess(t, terraformer, []access{
			{"get", "", "configmaps", "", shoot, "infra.infra.tf-config"},
			{"patch", "", "configmaps", "", shoot, "infra.infra.tf-config"},
			{"update", "", "configmaps", "", shoot, "infra.infra.tf-state"},
			// Create of any name in RBAC; the admission policy holds it to the run objects.
			{"create", "", "configmaps", "", shoot, ""},
			{"update", "", "configmaps", "", shoot, "infra.infra.tf-state.a-1"},
			{"delete", "", "configmaps", "", shoot, "infra.infra.tf-state.b-3"},
			{"get", "", "secrets", "", shoot, "infra.infra.tf-vars"},
		}, []access{
			{"get", "", "secrets", "", shoot, "cloudprovider"},
			{"list", "", "secrets", "", shoot, ""},
			{"update", "", "secrets", "", shoot, "infra.infra.tf-vars"},
			{"get", "", "configmaps", "", shoot, "another-configmap"},
			{"update", "", "configmaps", "", shoot, "another-configmap"},
			{"delete", "", "configmaps", "", shoot, "another-configmap"},
			{"delete", "", "configmaps", "", shoot, "infra.infra.tf-state"},
			{"watch", "", "configmaps", "", shoot, ""},
			{"list", "", "configmaps", "", shoot, ""},
			{"get", "", "configmaps", "", other, "infra.infra.tf-config"},
			{"get", "", "secrets", "", other, "infra.infra.tf-vars"},
			{"list", "", "configmaps", "", "", ""},
			{"deletecollection", "", "configmaps", "", shoot, ""},
			{"get", ext, "infrastructures", "", shoot, "infra"},
			{"create", "", "pods", "", shoot, ""},
			{"get", "", "serviceaccounts", "", shoot, "terraseed-terraformer"},
		})
		// RBAC cannot limit create by name: the chart's admission policy holds a run pod to
		// the names its Role lets it update, the run objects of the namespace's runs. A
		// compromised provider plugin neither fills etcd with ConfigMaps of its own nor takes
		// names others expect.
		refused := "the run pods create only the run objects their Role terraseed-terraformer names, not ConfigMap "
		g.Eventually(func() error {
			return terraformer.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "probe"}}, client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring(refused + "probe")))
		large := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "not-a-run-object"},
			Data: map[string]string{"filler": strings.Repeat("x", 900<<10)}}
		g.Expect(terraformer.Create(ctx, large)).To(MatchError(ContainSubstring(refused+"not-a-run-object")), "a ConfigMap of its own")
		g.Expect(terraformer.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "next.infra.tf-state"}})).
			To(MatchError(ContainSubstring(refused+"next.infra.tf-state")), "the state of a run the controller has not started")
		// For real: the state object and a part in its namespace, and nothing in another.
		state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infra.infra.tf-state"}, Data: map[string]string{"terraform.tfstate": "{}"}}
		g.Expect(terraformer.Create(ctx, state)).To(Succeed())
		g.Expect(terraformer.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infra.infra.tf-state.a-1"}})).To(Succeed())
		elsewhere := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "infra.infra.tf-state"}}
		g.Expect(apierrors.IsForbidden(terraformer.Create(ctx, elsewhere))).To(BeTrue())
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infra.infra.tf-vars"}})).To(Succeed())
		g.Expect(terraformer.Get(ctx, client.ObjectKey{Namespace: shoot, Name: "infra.infra.tf-vars"}, &corev1.Secret{})).To(Succeed())
		g.Expect(apierrors.IsForbidden(terraformer.List(ctx, &corev1.SecretList{}, client.InNamespace(shoot)))).To(BeTrue())
	})

	// With stateStorage secret the state and its parts are Secrets the run pod reaches by
	// name, its own only, and no ConfigMap of state at all; the controller grants it with
	// the chart's rights.
	t.Run("terraformer with the state in Secrets", func(t *testing.T) {
		g := NewWithT(t)
		secrets := env.LabelledNamespace(t, shootLabels)
		e := &executor.PodExecutor{Client: controller, ServiceAccountName: "terraseed-terraformer", State: state.Options{Storage: state.StorageSecret}}
		g.Expect(e.EnsureServiceAccount(ctx, run.ID{Namespace: secrets, Name: "infra", Purpose: run.PurposeInfra})).To(Succeed())
		terraformer := impersonateRunPod(t, secrets, "infra.infra.tf-run")
		checkAccess(t, terraformer, []access{
			{"get", "", "configmaps", "", secrets, "infra.infra.tf-config"},
			{"patch", "", "configmaps", "", secrets, "infra.infra.tf-config"},
			{"get", "", "secrets", "", secrets, "infra.infra.tf-state"},
			{"update", "", "secrets", "", secrets, "infra.infra.tf-state"},
			{"patch", "", "secrets", "", secrets, "infra.infra.tf-state"},
			{"create", "", "secrets", "", secrets, ""},
			{"update", "", "secrets", "", secrets, "infra.infra.tf-state.b-2"},
			{"delete", "", "secrets", "", secrets, "infra.infra.tf-state.a-1"},
			{"get", "", "secrets", "", secrets, "infra.infra.tf-vars"},
		}, []access{
			// Another Infrastructure's state in the same namespace.
			{"get", "", "secrets", "", secrets, "other.infra.tf-state"},
			{"update", "", "secrets", "", secrets, "other.infra.tf-state"},
			{"get", "", "secrets", "", secrets, "other.infra.tf-state.a-1"},
			{"get", "", "secrets", "", secrets, "cloudprovider"},
			{"list", "", "secrets", "", secrets, ""},
			{"watch", "", "secrets", "", secrets, ""},
			{"update", "", "secrets", "", secrets, "infra.infra.tf-vars"},
			{"delete", "", "secrets", "", secrets, "infra.infra.tf-state"},
			{"deletecollection", "", "secrets", "", secrets, ""},
			// No ConfigMap of state: not needed.
			{"create", "", "configmaps", "", secrets, ""},
			{"get", "", "configmaps", "", secrets, "infra.infra.tf-state"},
			{"update", "", "configmaps", "", secrets, "infra.infra.tf-state"},
			{"delete", "", "configmaps", "", secrets, "infra.infra.tf-state.a-1"},
			{"get", "", "secrets", "", other, "infra.infra.tf-state"},
		})
		refused := "the run pods create only the run objects their Role terraseed-terraformer names, not Secret "
		g.Eventually(func() error {
			return terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secrets, Name: "probe"}}, client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring(refused + "probe")))
		g.Expect(terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secrets, Name: "other.infra.tf-state"}})).
			To(MatchError(ContainSubstring(refused+"other.infra.tf-state")), "the state of a run the controller has not started")
		g.Expect(terraformer.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secrets, Name: "infra.infra.tf-vars"}})).
			To(MatchError(ContainSubstring(refused+"infra.infra.tf-vars")), "its variables, which only the controller writes")
		// For real: the state written through the store as the run pod writes it, split
		// into parts and back, and another Infrastructure's state refused.
		objects := state.RunObjects{ID: run.ID{Namespace: secrets, Name: "infra", Purpose: run.PurposeInfra}, Options: state.Options{Storage: state.StorageSecret}}
		store := objects.Store(terraformer)
		_, err := store.Claim(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		store.Limit = 16 << 10
		for serial, size := range []int{64 << 10, 100} {
			written, err := store.Save(ctx, randomState(g, int64(serial+1), size))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(written).To(BeTrue())
		}
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secrets, Name: "other.infra.tf-state"}})).To(Succeed())
		otherObjects := objects
		otherObjects.ID.Name = "other"
		_, err = otherObjects.Store(terraformer).Load(ctx)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})

	t.Run("a namespace the controller did not bind", func(t *testing.T) {
		checkAccess(t, impersonate(t, other, "terraseed-terraformer"), nil, []access{
			{"get", "", "configmaps", "", other, "infra.infra.tf-config"},
			{"get", "", "secrets", "", other, "infra.infra.tf-vars"},
		})
	})
}

func terraformerBinding(namespace, role string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "terraseed-terraformer-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: "terraseed-terraformer"}},
	}
}

// With the local executor the controller cannot start pods or bind roles.
func TestLocalExecutorRBAC(t *testing.T) {
	release := env.Namespace(t)
	// The ClusterRole and its binding are cluster-scoped: a second release name keeps
	// them apart from the other test's.
	ctx := context.Background()
	for _, o := range render(t, release, "-f", valuesFile("local-executor")) {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" {
			o.SetName("local-" + o.GetName())
			if o.GetKind() == "ClusterRoleBinding" {
				o.Object["roleRef"].(map[string]any)["name"] = o.GetName()
			}
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	shoot := env.Namespace(t)
	checkAccess(t, impersonate(t, release, "terraseed"), []access{
		{"patch", ext, "infrastructures", "", shoot, "infra"},
		{"create", "", "configmaps", "", shoot, ""},
		// The heartbeat needs its Lease without leader election too.
		{"update", "coordination.k8s.io", "leases", "", release, "gardener-extension-heartbeat"},
	}, []access{
		{"create", "", "pods", "", shoot, ""},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "terraseed-terraformer"},
		{"update", "coordination.k8s.io", "leases", "", shoot, "gardener-extension-heartbeat"},
	})
}

// randomState is a terraform state of serial with an output of about size random bytes,
// which gzip cannot shrink.
func randomState(g Gomega, serial int64, size int) []byte {
	noise := make([]byte, size*3/4)
	_, err := rand.Read(noise)
	g.Expect(err).NotTo(HaveOccurred())
	doc, err := json.Marshal(map[string]any{
		"version": 4, "terraform_version": "1.5.7", "serial": serial, "lineage": "lineage-a", "resources": []any{},
		"outputs": map[string]any{"blob": map[string]any{"value": base64.StdEncoding.EncodeToString(noise), "type": "string"}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	return doc
}
