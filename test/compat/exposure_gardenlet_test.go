package compat_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/component/extensions/selfhostedshootexposure"
	gardenerutils "github.com/gardener/gardener/pkg/utils/gardener"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// controlPlaneNode is a self-hosted shoot's control-plane node with the addresses a
// kubelet reports, Ready or not.
func controlPlaneNode(name, internalIP string, ready bool) corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady"}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: internalIP}},
		},
	}
}

// exposedEndpoints are the node and address of each endpoint of the exposure's
// EndpointSlices in the namespace the local provider made for it.
func exposedEndpoints(g Gomega, sh *shootInSeed, namespace string) map[string]string {
	slices := &discoveryv1.EndpointSliceList{}
	g.Expect(sh.seed.client.List(sh.ctx, slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: "kube-apiserver"})).To(Succeed())
	endpoints := map[string]string{}
	for _, slice := range slices.Items {
		for _, e := range slice.Endpoints {
			endpoints[*e.NodeName] = strings.Join(e.Addresses, ",")
		}
	}
	return endpoints
}

// TestGardenletDeploysChangesAndDestroysASelfHostedShootExposure: gardenlet's own
// SelfHostedShootExposure component (pkg/component/extensions/selfhostedshootexposure),
// with the endpoints gardenlet computes from the control-plane nodes
// (gardenerutils.ControlPlaneEndpointsFromNodes: the healthy nodes, every address),
// deploys the exposure and waits until it is ready, reading the address terraseed puts in
// status.ingress; when a node fails and another joins, the new endpoints reach the local
// provider's EndpointSlice; its destroy and wait remove what the exposure made. The
// credentialsRef is the one gardenlet sets for a shoot with managed infrastructure.
func TestGardenletDeploysChangesAndDestroysASelfHostedShootExposure(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "exposure", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := sh.ctx
	deploy := func(nodes ...corev1.Node) *selfhostedshootexposure.SelfHostedShootExposure {
		endpoints, err := gardenerutils.ControlPlaneEndpointsFromNodes(nodes)
		g.Expect(err).NotTo(HaveOccurred())
		exposure := selfhostedshootexposure.New(testr.New(t), sh.seed.client, clock.RealClock{}, &selfhostedshootexposure.Values{
			Namespace: sh.namespace, Name: sh.shoot.Name, Type: "local", Endpoints: endpoints,
			CredentialsRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Name: "cloudprovider", Namespace: sh.namespace},
		})
		exposure.WaitInterval, exposure.WaitSevereThreshold, exposure.WaitTimeout = waitInterval, waitSevereThreshold, waitTimeout
		g.Expect(exposure.Deploy(ctx)).To(Succeed())
		g.Expect(exposure.Wait(ctx)).To(Succeed())
		return exposure
	}
	get := func() *gardenextensionsv1alpha1.SelfHostedShootExposure {
		object := &gardenextensionsv1alpha1.SelfHostedShootExposure{}
		g.Expect(sh.seed.client.Get(ctx, client.ObjectKey{Namespace: sh.namespace, Name: sh.shoot.Name}, object)).To(Succeed())
		return object
	}

	exposure := deploy(controlPlaneNode("cp-0", "10.250.0.10", true), controlPlaneNode("cp-1", "10.250.0.11", true))
	g.Expect(get().Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeCreate))
	g.Expect(exposure.Ingress).To(HaveLen(1), "gardenlet reads the address from the status")
	g.Expect(exposure.Ingress[0].Hostname).To(MatchRegexp(`^kube-apiserver\.exposure-[0-9a-f]{40}\.svc$`))
	namespace := strings.TrimSuffix(strings.TrimPrefix(exposure.Ingress[0].Hostname, "kube-apiserver."), ".svc")
	g.Expect(exposedEndpoints(g, sh, namespace)).To(Equal(map[string]string{"cp-0": "10.250.0.10", "cp-1": "10.250.0.11"}))

	// cp-1 fails, cp-2 joins: gardenlet deploys the healthy nodes only.
	exposure = deploy(controlPlaneNode("cp-0", "10.250.0.10", true), controlPlaneNode("cp-1", "10.250.0.11", false), controlPlaneNode("cp-2", "10.250.0.12", true))
	g.Expect(get().Status.LastOperation.Type).To(Equal(gardencorev1beta1.LastOperationTypeReconcile))
	g.Expect(exposedEndpoints(g, sh, namespace)).To(Equal(map[string]string{"cp-0": "10.250.0.10", "cp-2": "10.250.0.12"}))
	g.Expect(exposure.Ingress).To(HaveLen(1))

	g.Expect(exposure.Destroy(ctx)).To(Succeed())
	g.Expect(exposure.WaitCleanup(ctx)).To(Succeed())
	g.Expect(apierrors.IsNotFound(sh.seed.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kube-apiserver"}, &corev1.Service{}))).To(BeTrue(), "the Service was destroyed")
	g.Expect(exposedEndpoints(g, sh, namespace)).To(BeEmpty(), "the EndpointSlices were destroyed")
}

func gardenerExposure() *gardenextensionsv1alpha1.SelfHostedShootExposure {
	return &gardenextensionsv1alpha1.SelfHostedShootExposure{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "SelfHostedShootExposure"},
		ObjectMeta: metav1.ObjectMeta{Name: "foobar", Namespace: "kube-system"},
		Spec: gardenextensionsv1alpha1.SelfHostedShootExposureSpec{
			DefaultSpec:    gardenerSpec("aws", `{"apiVersion":"aws.provider.terraseed.io/v1alpha1","kind":"SelfHostedShootExposureConfig"}`),
			CredentialsRef: &corev1.ObjectReference{Kind: "Secret", Namespace: "kube-system", Name: "cloudprovider", UID: "0815", APIVersion: "v1", ResourceVersion: "1", FieldPath: "data"},
			Port:           443,
			Endpoints: []gardenextensionsv1alpha1.ControlPlaneEndpoint{{
				NodeName: "cp-0", Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.250.0.10"}},
			}},
		},
		Status: gardenextensionsv1alpha1.SelfHostedShootExposureStatus{
			DefaultStatus: gardenerStatus(`{"apiVersion":"aws.provider.terraseed.io/v1alpha1","kind":"SelfHostedShootExposureStatus"}`, `{"lb":"arn"}`),
			Ingress: []corev1.LoadBalancerIngress{{
				IP: "52.1.2.5", Hostname: "kapi-0123.elb.eu-west-1.amazonaws.com", IPMode: ptr(corev1.LoadBalancerIPModeProxy),
				Ports: []corev1.PortStatus{{Port: 443, Protocol: corev1.ProtocolTCP, Error: ptr("none")}},
			}},
		},
	}
}

func TestSelfHostedShootExposureIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerExposure()
	g.Expect(unsetFields(reflect.ValueOf(theirs).Elem(), "SelfHostedShootExposure")).To(BeEmpty(), "the fixture must set every field Gardener has")
	roundTrip(g, theirs, &extensionsv1alpha1.SelfHostedShootExposure{}, &gardenextensionsv1alpha1.SelfHostedShootExposure{})
}

// withoutDescriptions is schema without its descriptions, which tell the same in other
// words.
func withoutDescriptions(schema apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	schema.Description = ""
	for name, property := range schema.Properties {
		schema.Properties[name] = withoutDescriptions(property)
	}
	if schema.Items != nil && schema.Items.Schema != nil {
		items := withoutDescriptions(*schema.Items.Schema)
		schema.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &items}
	}
	if schema.AdditionalProperties != nil && schema.AdditionalProperties.Schema != nil {
		additional := withoutDescriptions(*schema.AdditionalProperties.Schema)
		schema.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: schema.AdditionalProperties.Allows, Schema: &additional}
	}
	return schema
}

func readCRD(g Gomega, file string) *apiextensionsv1.CustomResourceDefinition {
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(yaml.Unmarshal(data, crd)).To(Succeed(), file)
	g.Expect(crd.Spec.Versions).To(HaveLen(1), file)
	return crd
}

// TestSelfHostedShootExposureCRDIsGardeners: the chart's selfhostedshootexposures CRD has
// the names, scope, subresources, columns and schema of Gardener's at the version go.mod
// requires, but for what every kind's shared spec has of terraseed's own (spec.type is not
// empty; spec.class is checked by terraseed, not by a rule of the API server).
func TestSelfHostedShootExposureCRDIsGardeners(t *testing.T) {
	g := NewWithT(t)
	gardener, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gardener/gardener").Output()
	g.Expect(err).NotTo(HaveOccurred())
	theirs := readCRD(g, filepath.Join(strings.TrimSpace(string(gardener)), "pkg", "component", "extensions", "crds", "assets",
		"crd-extensions.gardener.cloud_selfhostedshootexposures.yaml"))
	ours := readCRD(g, filepath.Join(repoRoot(), "charts", "terraseed", "crds", "extensions.gardener.cloud_selfhostedshootexposures.yaml"))
	g.Expect(ours.Name).To(Equal(theirs.Name))
	g.Expect(ours.Spec.Names).To(Equal(theirs.Spec.Names))
	g.Expect(ours.Spec.Scope).To(Equal(theirs.Spec.Scope))
	version, want := ours.Spec.Versions[0], theirs.Spec.Versions[0]
	g.Expect(version.Name).To(Equal(want.Name))
	g.Expect(version.Subresources).To(Equal(want.Subresources))
	g.Expect(version.AdditionalPrinterColumns).To(Equal(want.AdditionalPrinterColumns))

	schema, wantSchema := withoutDescriptions(*version.Schema.OpenAPIV3Schema), withoutDescriptions(*want.Schema.OpenAPIV3Schema)
	spec, wantSpec := schema.Properties["spec"], wantSchema.Properties["spec"]
	g.Expect(spec.Properties["type"].MinLength).To(Equal(ptr(int64(1))))
	typ := spec.Properties["type"]
	typ.MinLength = nil
	spec.Properties["type"] = typ
	g.Expect(wantSpec.Properties["class"].XValidations).To(HaveLen(1))
	class := wantSpec.Properties["class"]
	class.XValidations = nil
	wantSpec.Properties["class"] = class
	g.Expect(equality.Semantic.DeepEqual(schema, wantSchema)).To(BeTrue(), cmp.Diff(wantSchema, schema))
}
