package templates_test

import (
	"encoding/json"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

// withConfig returns the case's input with providerConfig replaced by the YAML given.
func withConfig(t *testing.T, c renderCase, config string) templates.Input {
	t.Helper()
	in := c.input(t)
	raw, err := yaml.YAMLToJSON([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	in.Infrastructure.Spec.ProviderConfig = &runtime.RawExtension{Raw: raw}
	return in
}

const awsHead = "apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1\nkind: InfrastructureConfig\n"

func awsZones(zones string) string {
	return awsHead + "networks:\n  vpc: {cidr: 10.250.0.0/16}\n  zones:\n" + zones
}

const zoneA = "  - {name: eu-west-1a, workers: 10.250.0.0/19, public: 10.250.96.0/22, internal: 10.250.112.0/22}\n"

// TestValidationErrors: each broken providerConfig yields exactly one error naming the field.
func TestValidationErrors(t *testing.T) {
	r := registry(t)
	awsCase := renderCase{provider: "aws", name: "one-zone", dir: "testdata/cases/aws/one-zone"}
	localCase := renderCase{provider: "local", name: "one-zone", dir: "testdata/cases/local/one-zone"}
	localHead := "apiVersion: local.provider.terraseed.io/v1alpha1\nkind: InfrastructureConfig\n"

	for _, tc := range []struct {
		name, config, field, message string
		base                         renderCase
	}{
		{"wrong kind", "apiVersion: aws.provider.extensions.gardener.cloud/v1alpha1\nkind: Config\nnetworks: {vpc: {cidr: 10.0.0.0/16}, zones: [{name: eu-west-1a, workers: 10.0.0.0/19, public: 10.0.32.0/22, internal: 10.0.36.0/22}]}", "providerConfig.kind", "", awsCase},
		{"wrong apiVersion", "apiVersion: v1\nkind: InfrastructureConfig\nnetworks: {vpc: {cidr: 10.0.0.0/16}, zones: [{name: eu-west-1a, workers: 10.0.0.0/19, public: 10.0.32.0/22, internal: 10.0.36.0/22}]}", "providerConfig.apiVersion", "", awsCase},
		{"no networks", awsHead, "providerConfig.networks", "Required value", awsCase},
		{"unknown top-level field", awsZones(zoneA) + "enableEverything: true\n", "providerConfig.enableEverything", "unknown field", awsCase},
		{"no vpc", awsHead + "networks:\n  zones:\n" + zoneA, "providerConfig.networks.vpc", "Required value", awsCase},
		{"vpc with both id and cidr", awsHead + "networks:\n  vpc: {id: vpc-1, cidr: 10.250.0.0/16}\n  zones:\n" + zoneA, "providerConfig.networks.vpc", "", awsCase},
		{"vpc with neither", awsHead + "networks:\n  vpc: {}\n  zones:\n" + zoneA, "providerConfig.networks.vpc", "", awsCase},
		{"malformed vpc id", awsHead + "networks:\n  vpc: {id: my-vpc}\n  zones:\n" + zoneA, "providerConfig.networks.vpc.id", `Invalid value: "my-vpc"`, awsCase},
		{"vpc cidr not a CIDR", awsHead + "networks:\n  vpc: {cidr: 10.250.0.0}\n  zones:\n" + zoneA, "providerConfig.networks.vpc.cidr", "must be a CIDR", awsCase},
		{"vpc cidr not canonical", awsHead + "networks:\n  vpc: {cidr: 10.250.1.0/16}\n  zones:\n" + zoneA, "providerConfig.networks.vpc.cidr", "did you mean 10.250.0.0/16", awsCase},
		{"no zones", awsHead + "networks:\n  vpc: {cidr: 10.250.0.0/16}\n  zones: []\n", "providerConfig.networks.zones", "", awsCase},
		{"zone without workers", awsZones(zoneA + "  - {name: eu-west-1b, public: 10.250.100.0/22, internal: 10.250.116.0/22}\n"), "providerConfig.networks.zones[1].workers", "Required value", awsCase},
		{"zone with bad name", awsZones("  - {name: \"eu-west-1a; rm\", workers: 10.250.0.0/19, public: 10.250.96.0/22, internal: 10.250.112.0/22}\n"), "providerConfig.networks.zones[0].name", "", awsCase},
		{"workers is a number", awsZones("  - {name: eu-west-1a, workers: 42, public: 10.250.96.0/22, internal: 10.250.112.0/22}\n"), "providerConfig.networks.zones[0].workers", "Invalid value: 42", awsCase},
		{"workers not canonical", awsZones(zoneA + "  - {name: eu-west-1b, workers: 10.250.33.0/19, public: 10.250.100.0/22, internal: 10.250.116.0/22}\n"), "providerConfig.networks.zones[1].workers", "canonical", awsCase},
		{"subnet outside the vpc", awsZones(zoneA + "  - {name: eu-west-1b, workers: 10.251.0.0/19, public: 10.250.100.0/22, internal: 10.250.116.0/22}\n"), "providerConfig.networks.zones[1].workers", "must lie inside providerConfig.networks.vpc.cidr", awsCase},
		{"subnet larger than the vpc", awsZones("  - {name: eu-west-1a, workers: 10.0.0.0/8, public: 10.250.96.0/22, internal: 10.250.112.0/22}\n"), "providerConfig.networks.zones[0].workers", "must lie inside", awsCase},
		{"overlapping subnets across zones", awsZones(zoneA + "  - {name: eu-west-1b, workers: 10.250.16.0/20, public: 10.250.100.0/22, internal: 10.250.116.0/22}\n"), "providerConfig.networks.zones[1].workers", "overlaps providerConfig.networks.zones[0].workers", awsCase},
		{"overlapping subnets in a zone", awsZones("  - {name: eu-west-1a, workers: 10.250.0.0/19, public: 10.250.0.0/22, internal: 10.250.112.0/22}\n"), "providerConfig.networks.zones[0].public", "overlaps providerConfig.networks.zones[0].workers", awsCase},
		{"bad elastic IP allocation", awsZones("  - {name: eu-west-1a, workers: 10.250.0.0/19, public: 10.250.96.0/22, internal: 10.250.112.0/22, elasticIPAllocationID: \"eip\"}\n"), "providerConfig.networks.zones[0].elasticIPAllocationID", "", awsCase},
		{"unknown zone field", awsZones("  - {name: eu-west-1a, workers: 10.250.0.0/19, public: 10.250.96.0/22, internal: 10.250.112.0/22, nodes: 10.250.0.0/19}\n"), "providerConfig.networks.zones[0].nodes", "unknown field", awsCase},
		{"enableECRAccess not a bool", awsZones(zoneA) + "enableECRAccess: \"yes\"\n", "providerConfig.enableECRAccess", "", awsCase},
		{"empty ignored tag", awsZones(zoneA) + "ignoreTags: {keys: [\"\"]}\n", "providerConfig.ignoreTags.keys[0]", "", awsCase},
		{"local: workers outside the nodes CIDR", localHead + "networks:\n  cidr: 10.250.0.0/16\n  nodes: 10.250.0.0/19\n  zones:\n  - {name: a, workers: 10.250.0.0/19}\n  - {name: b, workers: 10.250.32.0/19}\n", "providerConfig.networks.zones[1].workers", "must lie inside the nodes CIDR providerConfig.networks.nodes", localCase},
		{"local: nodes not a CIDR", localHead + "networks:\n  cidr: 10.250.0.0/16\n  nodes: everything\n  zones:\n  - {name: a, workers: 10.250.0.0/19}\n", "providerConfig.networks.nodes", "must be a CIDR", localCase},
		{"local: namespace not a DNS label", localHead + "namespace: Not_A_Label\nnetworks:\n  cidr: 10.250.0.0/16\n  zones:\n  - {name: a, workers: 10.250.0.0/19}\n", "providerConfig.namespace", "", localCase},
		{"local: providerConfig is a list", "[1, 2]", "providerConfig", "", localCase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			in := withConfig(t, tc.base, tc.config)
			p, err := r.Provider(in.Infrastructure.Spec.Type)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = p.Render(in)
			var verr *templates.ValidationError
			g.Expect(errors.As(err, &verr)).To(BeTrue(), "want a ValidationError, got %v", err)
			g.Expect(verr.Codes()).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
			g.Expect(verr.Errors).To(HaveLen(1), "want one clear error, got: %v", verr)
			g.Expect(verr.Errors[0].Field).To(Equal(tc.field))
			g.Expect(verr.Error()).To(ContainSubstring(tc.field))
			g.Expect(verr.Error()).To(ContainSubstring(tc.message))
			g.Expect(verr.Error()).NotTo(ContainSubstring("null"), "a value the user gave, or none")
		})
	}
}

// TestShootNetworksAreChecked: a template may rely on the shoot's networks, so they are
// validated like the providerConfig.
func TestShootNetworksAreChecked(t *testing.T) {
	g := NewWithT(t)
	c := renderCase{provider: "aws", name: "three-zones", dir: "testdata/cases/aws/three-zones"}
	in := c.input(t)
	var shoot map[string]any
	g.Expect(json.Unmarshal(in.Cluster.Spec.Shoot.Raw, &shoot)).To(Succeed())
	shoot["spec"].(map[string]any)["networking"].(map[string]any)["nodes"] = "10.250.0.0/18"
	in.Cluster.Spec.Shoot.Raw, _ = json.Marshal(shoot)

	p, err := registry(t).Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	err = p.Validate(in)
	var verr *templates.ValidationError
	g.Expect(errors.As(err, &verr)).To(BeTrue(), "got %v", err)
	g.Expect(verr.Errors).To(HaveLen(1))
	g.Expect(verr.Errors[0].Field).To(Equal("providerConfig.networks.zones[2].workers"))
	g.Expect(verr.Errors[0].Detail).To(ContainSubstring("cluster.shoot.spec.networking.nodes"))
}

// TestTemplatesRejectWhatTheyCannotRender: the local provider's default namespace is made
// of the Infrastructure's namespace and name, which the schema does not see.
func TestTemplatesRejectWhatTheyCannotRender(t *testing.T) {
	r := registry(t)
	localCase := renderCase{provider: "local", name: "one-zone", dir: "testdata/cases/local/one-zone"}
	for name, infraName := range map[string]string{
		"too long":    "an-infrastructure-whose-name-is-far-too-long-for-a-namespace",
		"not a label": "infra.structure",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			in := localCase.input(t)
			in.Infrastructure.Name = infraName
			p, err := r.Provider("local")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = p.Render(in)
			var verr *templates.ValidationError
			g.Expect(errors.As(err, &verr)).To(BeTrue(), "want a ValidationError, got %v", err)
			g.Expect(verr.Codes()).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
			g.Expect(verr.Errors).To(HaveLen(1))
			g.Expect(verr.Errors[0].Field).To(Equal("providerConfig.namespace"))
			g.Expect(verr.Error()).To(ContainSubstring(in.Infrastructure.Namespace + "--" + infraName))
			g.Expect(verr.Error()).To(ContainSubstring("set providerConfig.namespace"))

			// Naming the namespace renders.
			in = withConfig(t, localCase, "apiVersion: local.provider.terraseed.io/v1alpha1\nkind: InfrastructureConfig\nnamespace: shoot-dev\nnetworks:\n  cidr: 10.250.0.0/16\n  zones:\n  - {name: a, workers: 10.250.0.0/19}\n")
			in.Infrastructure.Name = infraName
			_, err = p.Render(in)
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}
