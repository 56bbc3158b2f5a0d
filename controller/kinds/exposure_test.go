package kinds_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
)

// newExposure is a local SelfHostedShootExposure as gardenlet writes it for a shoot with
// managed infrastructure, over the given control-plane nodes and their InternalIPs.
func newExposure(ns string, nodes map[string]string) *extensionsv1alpha1.SelfHostedShootExposure {
	e := &extensionsv1alpha1.SelfHostedShootExposure{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: extensionsv1alpha1.SelfHostedShootExposureSpec{
			DefaultSpec:    extensionsv1alpha1.DefaultSpec{Type: "local"},
			CredentialsRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: "cloudprovider"},
			Port:           443,
		},
	}
	setEndpoints(e, nodes)
	return e
}

func setEndpoints(e *extensionsv1alpha1.SelfHostedShootExposure, nodes map[string]string) {
	e.Spec.Endpoints = nil
	for node, ip := range nodes {
		e.Spec.Endpoints = append(e.Spec.Endpoints, extensionsv1alpha1.ControlPlaneEndpoint{NodeName: node, Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: node}, {Type: corev1.NodeInternalIP, Address: ip},
		}})
	}
}

// createdExposureNamespace waits until exposure is created and returns the namespace of
// its Service, from the address its status names: kube-apiserver.<namespace>.svc.
func createdExposureNamespace(t *testing.T, exposure *extensionsv1alpha1.SelfHostedShootExposure) string {
	t.Helper()
	waitForKind(t, exposure, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g := NewWithT(t)
	g.Expect(exposure.Status.Ingress).To(HaveLen(1), "the status names the exposure's address")
	g.Expect(exposure.Status.Ingress[0].Hostname).To(MatchRegexp(`^kube-apiserver\.exposure-[0-9a-f]{40}\.svc$`))
	return strings.TrimSuffix(strings.TrimPrefix(exposure.Status.Ingress[0].Hostname, "kube-apiserver."), ".svc")
}

// exposedNodes are the node and address of each endpoint of the EndpointSlices of the
// exposure's Service, by address type.
func exposedNodes(g Gomega, namespace string) map[discoveryv1.AddressType]map[string]string {
	slices := &discoveryv1.EndpointSliceList{}
	g.Expect(env.Client.List(context.Background(), slices, client.InNamespace(namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kube-apiserver"})).To(Succeed())
	nodes := map[discoveryv1.AddressType]map[string]string{}
	for _, slice := range slices.Items {
		g.Expect(slice.Ports).To(ConsistOf(HaveField("Port", HaveValue(BeNumerically("==", 443)))))
		nodes[slice.AddressType] = map[string]string{}
		for _, endpoint := range slice.Endpoints {
			g.Expect(endpoint.Addresses).To(HaveLen(1))
			g.Expect(endpoint.NodeName).NotTo(BeNil())
			nodes[slice.AddressType][*endpoint.NodeName] = endpoint.Addresses[0]
		}
	}
	return nodes
}

// A SelfHostedShootExposure is created through the same operations as an Infrastructure,
// with the credentials its credentialsRef names: a Service without selector on its port
// and an EndpointSlice of the nodes' InternalIPs, the Service's name in status.ingress.
// gardenlet's change of the endpoints (a node replaced, an IPv6 node added) changes the
// slices in place; the deletion destroys what it made and the runs' objects.
func TestSelfHostedShootExposureCreateChangeOfEndpointsAndDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, "cloudprovider")
	c := startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	g.Expect(c.served).To(ContainElement("selfhostedshootexposure"))
	applies := func() float64 {
		return metric(g, "terraseed_terraform_runs_total", map[string]string{"kind": "selfhostedshootexposure", "command": "apply", "result": "succeeded"}).GetCounter().GetValue()
	}
	appliesBefore := applies()

	exposure := newExposure(ns, map[string]string{"machine-0": "10.250.0.10", "machine-1": "10.250.0.11"})
	g.Expect(env.Client.Create(ctx, exposure)).To(Succeed())
	exposureNS := createdExposureNamespace(t, exposure)
	g.Expect(exposure.Finalizers).To(ContainElement("extensions.gardener.cloud/selfhostedshootexposure"))
	service := &corev1.Service{}
	g.Expect(env.Client.Get(ctx, keyOf(exposureNS, "kube-apiserver"), service)).To(Succeed())
	g.Expect(service.Spec.Selector).To(BeEmpty(), "the Service's endpoints are the nodes, not pods")
	g.Expect(service.Spec.Ports).To(ConsistOf(HaveField("Port", BeNumerically("==", 443))))
	g.Expect(exposedNodes(g, exposureNS)).To(Equal(map[discoveryv1.AddressType]map[string]string{
		discoveryv1.AddressTypeIPv4: {"machine-0": "10.250.0.10", "machine-1": "10.250.0.11"},
	}))
	g.Expect(kindRunObjectsLeft(g, ns, exposure.Name, "selfhostedshootexposure")).To(ConsistOf("prod.selfhostedshootexposure.tf-config",
		"prod.selfhostedshootexposure.tf-state", "prod.selfhostedshootexposure.tf-vars", "prod.selfhostedshootexposure.credentials"))

	// A node replaced and an IPv6 node added, as gardenlet's exposure controller writes them.
	setEndpoints(exposure, map[string]string{"machine-0": "10.250.0.10", "machine-2": "10.250.0.12", "machine-3": "2001:db8::13"})
	g.Expect(env.Client.Update(ctx, exposure)).To(Succeed())
	g.Eventually(exposedNodes).WithArguments(exposureNS).WithTimeout(3 * time.Minute).Should(Equal(map[discoveryv1.AddressType]map[string]string{
		discoveryv1.AddressTypeIPv4: {"machine-0": "10.250.0.10", "machine-2": "10.250.0.12"},
		discoveryv1.AddressTypeIPv6: {"machine-3": "2001:db8::13"},
	}))
	waitForKind(t, exposure, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(exposure.Status.Ingress).To(HaveLen(1))
	g.Expect(applies()-appliesBefore).To(BeNumerically("==", 2), "the create and the change, counted under the exposure's kind")
	entries, err := kinds.StateHistory(ctx, env.Client, kinds.StateRef{Kind: "selfhostedshootexposure", Key: client.ObjectKeyFromObject(exposure)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2), "the create's state and the change's")

	g.Expect(env.Client.Delete(ctx, exposure)).To(Succeed())
	waitKindGone(t, exposure)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(service), service))).To(BeTrue(), "the Service was destroyed")
	g.Expect(exposedNodes(g, exposureNS)).To(BeEmpty(), "the EndpointSlices were destroyed")
	g.Expect(kindRunObjectsLeft(g, ns, exposure.Name, "selfhostedshootexposure")).To(BeEmpty())
}

// A SelfHostedShootExposure migrated away keeps its state in its status and releases its
// run objects; restored, it takes the state back and recreates nothing. Without
// credentialsRef (a shoot with unmanaged infrastructure) it uses the Secret cloudprovider
// of its namespace.
func TestSelfHostedShootExposureMigrateThenRestore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, "cloudprovider")
	startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	exposure := newExposure(ns, map[string]string{"machine-0": "10.250.0.10"})
	exposure.Spec.CredentialsRef = nil
	g.Expect(env.Client.Create(ctx, exposure)).To(Succeed())
	exposureNS := createdExposureNamespace(t, exposure)
	service := &corev1.Service{}
	g.Expect(env.Client.Get(ctx, keyOf(exposureNS, "kube-apiserver"), service)).To(Succeed())
	created := service.UID

	annotateKind(g, exposure, extension.OperationMigrate)
	waitForKind(t, exposure, extensionsv1alpha1.LastOperationTypeMigrate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(exposure.Status.State).NotTo(BeNil(), "the state travels in the status")
	g.Eventually(func(g Gomega) []string { return kindRunObjectsLeft(g, ns, exposure.Name, "selfhostedshootexposure") }).
		WithTimeout(time.Minute).Should(BeEmpty(), "a migration releases the run objects")
	g.Expect(env.Client.Get(ctx, keyOf(exposureNS, "kube-apiserver"), service)).To(Succeed(), "a migration destroys nothing")

	annotateKind(g, exposure, extension.OperationRestore)
	waitForKind(t, exposure, extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(env.Client.Get(ctx, keyOf(exposureNS, "kube-apiserver"), service)).To(Succeed())
	g.Expect(service.UID).To(Equal(created), "the restore recreated nothing")
	g.Expect(exposedNodes(g, exposureNS)).To(Equal(map[discoveryv1.AddressType]map[string]string{discoveryv1.AddressTypeIPv4: {"machine-0": "10.250.0.10"}}))
	g.Expect(exposure.Status.Ingress).To(HaveLen(1), "the restore reports the address again")
	g.Expect(kindRunObjectsLeft(g, ns, exposure.Name, "selfhostedshootexposure")).To(HaveLen(4), "the restore wrote the run objects back")
}
