package chart

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/controlplane"
	"github.com/terraseed/terraseed/templates"
)

// The aws ControlPlane with the custom route controller, applied server-side as the
// controller applies it and as the chart's ServiceAccount: the chart's RBAC is enough for
// every object it renders. The route controller's own ServiceAccount may then read the
// shoot's credentials Secret and nothing else, and its pod runs as that ServiceAccount with
// its token and the labels that let it reach the seed's and the shoot's API servers. Its
// workloads run as the chart runs the controller.
func TestAWSControlPlaneAppliesAsTheController(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	// Cluster-scoped objects get another release name, apart from the other tests'; the
	// controller's admission policy is in force.
	chart := installRenamed(t, "controlplane-", release, "--include-crds")
	shoot := env.LabelledNamespace(t, shootLabels)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "cloudprovider"},
		Data: map[string][]byte{"accessKeyID": []byte("AKIA"), "secretAccessKey": []byte("secret")}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "other"}})).To(Succeed())

	registry, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	aws, err := registry.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	rendered, err := aws.RenderControlPlane(templates.ControlPlaneInput{
		ControlPlane: &extensionsv1alpha1.ControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "control-plane"},
			Spec: extensionsv1alpha1.ControlPlaneSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws", ProviderConfig: &runtime.RawExtension{Raw: []byte(
					`{"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "ControlPlaneConfig", "cloudControllerManager": {"useCustomRouteController": true}}`)}},
				Region:    "eu-west-1",
				SecretRef: corev1.SecretReference{Namespace: shoot, Name: "cloudprovider"},
				InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(
					`{"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "InfrastructureStatus", "vpc": {"id": "vpc-1234", "subnets": [{"id": "subnet-1", "purpose": "nodes", "zone": "eu-west-1a"}]}}`)},
			},
		},
		Cluster: &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{Shoot: runtime.RawExtension{Raw: []byte(
			`{"spec": {"kubernetes": {"version": "1.37.1"}, "networking": {"pods": "100.96.0.0/11"}}}`)}}},
	})
	g.Expect(err).NotTo(HaveOccurred())

	controller := impersonate(t, release, "terraseed")
	changes, err := controlplane.NewResourceManager(controller).ApplyAllStaged(ctx, rendered.Objects,
		ssa.ApplyOptions{Force: true, WaitInterval: 2 * time.Second, WaitTimeout: time.Minute})
	g.Expect(err).NotTo(HaveOccurred(), "applied as the chart's ServiceAccount")
	g.Expect(changes.Entries).To(HaveLen(len(rendered.Objects)))

	// The route controller's ServiceAccount reads the credentials, and nothing else.
	route := impersonate(t, shoot, "aws-custom-route-controller")
	g.Expect(route.Get(ctx, client.ObjectKey{Namespace: shoot, Name: "cloudprovider"}, &corev1.Secret{})).To(Succeed())
	// The controller binds no other Role than the route controller's.
	checkAccess(t, controller, []access{{"bind", "rbac.authorization.k8s.io", "roles", "", shoot, "aws-custom-route-controller"}},
		[]access{{"bind", "rbac.authorization.k8s.io", "roles", "", shoot, "other"}})
	checkAccess(t, route, nil, []access{
		{"get", "", "secrets", "", shoot, "other"},
		{"list", "", "secrets", "", shoot, ""},
		{"get", "", "secrets", "", release, "cloudprovider"},
		{"update", "", "secrets", "", shoot, "cloudprovider"},
		{"get", "", "configmaps", "", shoot, "cloud-provider-config"},
	})

	// The local control plane too, with its default image, in another shoot namespace.
	local, err := registry.Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	localShoot := env.LabelledNamespace(t, shootLabels)
	renderedLocal, err := local.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: &extensionsv1alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: localShoot, Name: "control-plane"},
		Spec: extensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "ControlPlaneConfig"}`)}},
			Region:    "local-1",
			SecretRef: corev1.SecretReference{Namespace: localShoot, Name: "cloudprovider"},
			InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "InfrastructureStatus", "namespace": "infra", "zones": [{"name": "zone-a", "workers": "10.250.0.0/19"}]}`)},
		},
	}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = controlplane.NewResourceManager(controller).ApplyAllStaged(ctx, renderedLocal.Objects,
		ssa.ApplyOptions{Force: true, WaitInterval: 2 * time.Second, WaitTimeout: time.Minute})
	g.Expect(err).NotTo(HaveOccurred(), "the local control plane applied as the chart's ServiceAccount")

	deployment := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: shoot, Name: "aws-custom-route-controller"}, deployment)).To(Succeed())
	pod := deployment.Spec.Template
	g.Expect(pod.Spec.ServiceAccountName).To(Equal("aws-custom-route-controller"))
	g.Expect(pod.Spec.AutomountServiceAccountToken).To(HaveValue(BeTrue()), "inClusterConfig needs the token")
	g.Expect(pod.Spec.Containers[0].Command).To(ContainElement("--control-kubeconfig=inClusterConfig"))
	g.Expect(pod.Labels).To(And(
		HaveKeyWithValue("networking.gardener.cloud/to-runtime-apiserver", "allowed"),
		HaveKeyWithValue("networking.resources.gardener.cloud/to-kube-apiserver-tcp-443", "allowed"),
		HaveKeyWithValue("networking.gardener.cloud/to-dns", "allowed"),
		HaveKeyWithValue("networking.gardener.cloud/to-public-networks", "allowed"),
	))

	// Both workloads run as the chart runs the controller, and have a disruption budget.
	controllerDeployment, controllerContainer := controllerContainer(t, chart)
	for _, name := range []string{"cloud-controller-manager", "aws-custom-route-controller"} {
		d := &appsv1.Deployment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: shoot, Name: name}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.SecurityContext).To(Equal(controllerDeployment.Spec.Template.Spec.SecurityContext), name)
		c := d.Spec.Template.Spec.Containers[0]
		g.Expect(c.SecurityContext).To(Equal(controllerContainer.SecurityContext), name)
		g.Expect(quantities(c.Resources.Requests)).To(Equal(quantities(controllerContainer.Resources.Requests)), name)
		g.Expect(quantities(c.Resources.Limits)).To(Equal(quantities(controllerContainer.Resources.Limits)), name)
		pdb := &policyv1.PodDisruptionBudget{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: shoot, Name: name}, pdb)).To(Succeed())
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(selector.Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue(), "%s's budget selects its pods", name)
		g.Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1), name)
	}
}

func quantities(list corev1.ResourceList) map[corev1.ResourceName]string {
	out := map[corev1.ResourceName]string{}
	for name, q := range list {
		out[name] = q.String()
	}
	return out
}
