package templates_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/internal/tftest"
	"github.com/terraseed/terraseed/test/testenv"
)

// kindExposure is the kind a provider serves SelfHostedShootExposures from.
const kindExposure = templates.Kind("selfhostedshootexposure")

// exposure is a SelfHostedShootExposure as gardenlet writes it for a shoot with managed
// infrastructure: its credentials are the Secret cloudprovider of its namespace, its
// endpoints the control-plane nodes with their addresses of every type.
func exposure(specType, providerConfig string) *extensionsv1alpha1.SelfHostedShootExposure {
	e := &extensionsv1alpha1.SelfHostedShootExposure{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "shoot--dev--prod", UID: "0b6f3a52-6f6e-4c1e-9b8a-3f2d1c0e9a87"},
		Spec: extensionsv1alpha1.SelfHostedShootExposureSpec{
			DefaultSpec:    extensionsv1alpha1.DefaultSpec{Type: specType},
			CredentialsRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Name: "cloudprovider", Namespace: "shoot--dev--prod"},
			Port:           443,
			Endpoints: []extensionsv1alpha1.ControlPlaneEndpoint{
				{NodeName: "machine-0", Addresses: []corev1.NodeAddress{
					{Type: corev1.NodeHostName, Address: "machine-0"}, {Type: corev1.NodeInternalIP, Address: "10.250.0.10"},
					{Type: corev1.NodeExternalIP, Address: "203.0.113.10"}, {Type: corev1.NodeInternalIP, Address: "2001:db8::10"},
				}},
				{NodeName: "machine-1", Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.250.1.11"}}},
			},
		},
	}
	if providerConfig != "" {
		e.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(providerConfig)}
	}
	return e
}

// TestAWSExposureIsANetworkLoadBalancerOverTheNodesAddresses: an exposure renders a
// network load balancer in the shoot's load balancer subnets, a target group of type ip
// over the nodes' InternalIP addresses of the shoot's IP family (not their external or host
// names),
// a TCP listener on the port, and the nodes' group opened to the port from the VPC; the
// configuration is formatted and terraform validate accepts it with the hashicorp/aws
// provider. The load balancer's DNS name becomes status.ingress.
func TestAWSExposureIsANetworkLoadBalancerOverTheNodesAddresses(t *testing.T) {
	g := NewWithT(t)
	k := awsKind(t, registry(t), kindExposure, "aws")
	g.Expect(k.Manifest.ProtectedResources).To(BeEmpty(), "everything goes with the exposure")

	out, err := k.Render(templates.KindInput{Object: exposure("aws", ""), Cluster: awsShootCluster(t, "eu-west-1")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(Equal(map[string]any{
		"region": "eu-west-1", "cluster_name": "shoot--dev--prod", "exposure_name": "prod", "port": float64(443),
		"addresses": []any{"10.250.0.10", "10.250.1.11"}, "internal": false,
	}))
	main := out.Files["main.tf"]
	g.Expect(main).To(MatchRegexp(`load_balancer_type\s+= "network"`))
	g.Expect(main).To(MatchRegexp(`target_type\s+= "ip"`))
	g.Expect(main).To(MatchRegexp(`resource "aws_lb_target_group_attachment" "endpoint" \{\s+for_each\s+= local.addresses`))
	g.Expect(main).To(MatchRegexp(`resource "aws_lb_listener" "exposure" \{[^}]+protocol\s+= "TCP"`))
	g.Expect(main).To(ContainSubstring(`data "aws_subnets" "load_balancers"`), "the subnets are found by the Infrastructure's tags")
	g.Expect(main).To(MatchRegexp(`"elbv2"|elbv2\s+= endpoints.value`), "an endpoint (LocalStack) replaces the load balancers' API too")
	checkAWSKindConfig(t, k, out, awsKindCredentials(t, registry(t), k, false))
	dir := t.TempDir()
	for name, content := range out.Files {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}
	testenv.ValidateWithAWSProvider(t, testenv.Terraform(t), dir)

	status, err := k.Status(map[string]any{"hostname": "kapi-0123456789abcdef-0123456789abcdef.elb.eu-west-1.amazonaws.com"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Fields).To(Equal(map[string]string{"ingress.hostname": "kapi-0123456789abcdef-0123456789abcdef.elb.eu-west-1.amazonaws.com"}))

	out, err = k.Render(templates.KindInput{
		Object:  exposure("aws", `{"vpcID": "vpc-0a1b2c3d", "subnetIDs": ["subnet-0e1f2a3b", "subnet-1e1f2a3b"], "internal": true, "region": "us-west-2"}`),
		Cluster: awsShootCluster(t, "eu-west-1"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("subnet_ids", []any{"subnet-0e1f2a3b", "subnet-1e1f2a3b"}))
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("internal", true))
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("region", "us-west-2"))
	g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring("aws_subnets"), "the subnets given are not looked up")
	checkAWSKindConfig(t, k, out, awsKindCredentials(t, registry(t), k, false))

	// An IPv6 shoot's target group holds the nodes' IPv6 addresses; its load balancer is
	// dual-stack.
	out, err = k.Render(templates.KindInput{Object: exposure("aws", ""), Cluster: awsShootCluster(t, "eu-west-1", "IPv6")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("addresses", []any{"2001:db8::10"}))
	g.Expect(out.Files["main.tf"]).To(MatchRegexp(`target_type\s+= "ip"\s+ip_address_type\s+= "ipv6"`))
	g.Expect(out.Files["main.tf"]).To(MatchRegexp(`ip_address_type\s+= "dualstack"`))
	g.Expect(out.Files["main.tf"]).To(ContainSubstring("ipv6_cidr_blocks"))
	checkAWSKindConfig(t, k, out, awsKindCredentials(t, registry(t), k, false))
	dir = t.TempDir()
	for name, content := range out.Files {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}
	testenv.ValidateWithAWSProvider(t, testenv.Terraform(t), dir)

	_, err = k.Render(templates.KindInput{Object: exposure("aws", `{"vpcID": "vpc-0a1b2c3d"}`), Cluster: awsShootCluster(t, "eu-west-1")})
	var invalid *templates.ValidationError
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("subnetIDs"))
}

// TestExposureInputIsCheckedNamingTheField: what Gardener's validation of an exposure
// refuses is refused before a render, naming the field.
func TestExposureInputIsCheckedNamingTheField(t *testing.T) {
	r := registry(t)
	for _, c := range []struct {
		name, field string
		change      func(e *extensionsv1alpha1.SelfHostedShootExposure)
	}{
		{"no port", "spec.port", func(e *extensionsv1alpha1.SelfHostedShootExposure) { e.Spec.Port = 0 }},
		{"no endpoints", "spec.endpoints", func(e *extensionsv1alpha1.SelfHostedShootExposure) { e.Spec.Endpoints = nil }},
		{"no node name", "spec.endpoints[1].nodeName", func(e *extensionsv1alpha1.SelfHostedShootExposure) { e.Spec.Endpoints[1].NodeName = "" }},
		{"not an IP", "spec.endpoints[0].addresses[1].address", func(e *extensionsv1alpha1.SelfHostedShootExposure) {
			e.Spec.Endpoints[0].Addresses[1].Address = "10.250.0"
		}},
		{"an unknown address type", "spec.endpoints[1].addresses[0].type", func(e *extensionsv1alpha1.SelfHostedShootExposure) {
			e.Spec.Endpoints[1].Addresses[0].Type = "PodIP"
		}},
		{"credentials of another kind", "spec.credentialsRef", func(e *extensionsv1alpha1.SelfHostedShootExposure) {
			e.Spec.CredentialsRef.Kind = "WorkloadIdentity"
		}},
		{"credentials of another namespace", "spec.credentialsRef.namespace", func(e *extensionsv1alpha1.SelfHostedShootExposure) {
			e.Spec.CredentialsRef.Namespace = "garden"
		}},
	} {
		for _, provider := range []string{"aws", "local"} {
			t.Run(provider+"/"+c.name, func(t *testing.T) {
				g := NewWithT(t)
				k, err := r.Kind(kindExposure, provider)
				g.Expect(err).NotTo(HaveOccurred())
				e := exposure(provider, "")
				c.change(e)
				_, err = k.Render(templates.KindInput{Object: e, Cluster: awsShootCluster(t, "eu-west-1")})
				var invalid *templates.ValidationError
				g.Expect(errors.As(err, &invalid)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(c.field + ":"))
			})
		}
	}
}

// TestLocalExposureIsAServiceWithoutSelectorAndItsEndpointSlices: the local exposure's
// Service selects no pods; its EndpointSlices, one per IP family that has addresses,
// hold the nodes' InternalIP addresses; the exposure's credentials are its
// credentialsRef, else the Secret cloudprovider of its namespace.
func TestLocalExposureIsAServiceWithoutSelectorAndItsEndpointSlices(t *testing.T) {
	g := NewWithT(t)
	k, err := registry(t).Kind(kindExposure, "local")
	g.Expect(err).NotTo(HaveOccurred())
	e := exposure("local", "")
	out, err := k.Render(templates.KindInput{Object: e})
	g.Expect(err).NotTo(HaveOccurred())
	tfvars := awsTFVars(t, out)
	g.Expect(tfvars).To(HaveKeyWithValue("addresses", []any{
		map[string]any{"nodeName": "machine-0", "ip": "10.250.0.10"},
		map[string]any{"nodeName": "machine-0", "ip": "2001:db8::10"},
		map[string]any{"nodeName": "machine-1", "ip": "10.250.1.11"},
	}))
	g.Expect(out.Files["main.tf"]).NotTo(MatchRegexp(`selector\s*=`))
	g.Expect(out.Files["main.tf"]).To(ContainSubstring(`"EndpointSlice"`))

	g.Expect(e.GetSecretRef()).To(Equal(corev1.SecretReference{Name: "cloudprovider", Namespace: "shoot--dev--prod"}))
	e.Spec.CredentialsRef.Name = "exposure-credentials"
	g.Expect(e.GetSecretRef()).To(Equal(corev1.SecretReference{Name: "exposure-credentials", Namespace: "shoot--dev--prod"}))
	e.Spec.CredentialsRef = nil
	g.Expect(e.GetSecretRef()).To(Equal(corev1.SecretReference{Name: "cloudprovider", Namespace: "shoot--dev--prod"}), "unmanaged infrastructure")
}

// TestLocalExposureIsFormatted: terraform fmt leaves the local exposure's files alone.
func TestLocalExposureIsFormatted(t *testing.T) {
	k, err := registry(t).Kind(kindExposure, "local")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	out, err := k.Render(templates.KindInput{Object: exposure("local", "")})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	formatted, files, err := tftest.New(t, out, nil).FormatCheck(context.Background())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(files).To(BeEmpty())
	NewWithT(t).Expect(formatted).To(BeTrue())
}
