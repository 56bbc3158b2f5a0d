package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/templates"
)

// The example registration serves the types its deployment's values serve, and those
// values render with the chart.
func TestGardenerRegistrationExample(t *testing.T) {
	g := NewWithT(t)
	content, err := os.ReadFile(filepath.Join(repoRoot, "examples/gardener/controller-registration.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(content)), 4096)
	objects := map[string]*unstructured.Unstructured{}
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			break
		}
		objects[u.GetKind()] = u
	}
	deployment, registration := objects["ControllerDeployment"], objects["ControllerRegistration"]
	g.Expect(deployment).NotTo(BeNil())
	g.Expect(registration).NotTo(BeNil())
	g.Expect(deployment.GetAPIVersion()).To(Equal("core.gardener.cloud/v1"))

	refs, _, _ := unstructured.NestedSlice(registration.Object, "spec", "deployment", "deploymentRefs")
	g.Expect(refs).To(ConsistOf(HaveKeyWithValue("name", deployment.GetName())))
	resources, _, _ := unstructured.NestedSlice(registration.Object, "spec", "resources")
	registered := map[string][]any{}
	for _, r := range resources {
		kind := r.(map[string]any)["kind"].(string)
		g.Expect(kind).To(BeElementOf("Infrastructure", "ControlPlane", "BackupBucket", "BackupEntry", "DNSRecord", "Bastion", "SelfHostedShootExposure"))
		registered[kind] = append(registered[kind], r.(map[string]any)["type"])
	}
	// Every type with a control plane registers it: the embedded providers all have one.
	g.Expect(registered["ControlPlane"]).To(ConsistOf(registered["Infrastructure"]...))
	values, found, err := unstructured.NestedMap(deployment.Object, "helm", "values")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(values["providerTypes"]).To(ConsistOf(registered["Infrastructure"]...))
	// Every kind the served providers ship templates for is registered with their types,
	// and no other: the chart serves them all by default.
	providers, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	var types []string
	for _, t := range registered["Infrastructure"] {
		types = append(types, t.(string))
	}
	names := map[templates.Kind]string{templates.KindBackupBucket: "BackupBucket", templates.KindBackupEntry: "BackupEntry", templates.KindDNSRecord: "DNSRecord",
		templates.KindBastion: "Bastion", templates.Kind("selfhostedshootexposure"): "SelfHostedShootExposure"}
	g.Expect(names).To(HaveLen(len(templates.Kinds)), "every templated kind is checked")
	for kind, name := range names {
		g.Expect(templates.Kinds).To(ContainElement(kind))
		want := []any{}
		for _, t := range kinds.Types(providers, kind, types) {
			want = append(want, t)
		}
		g.Expect(registered[name]).To(ConsistOf(want...), "the %s types registered", name)
	}

	valuesYAML, err := yaml.Marshal(values)
	g.Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(t.TempDir(), "values.yaml")
	g.Expect(os.WriteFile(file, valuesYAML, 0o600)).To(Succeed())
	_, err = helm(t, "lint", "--strict", chartDir, "-f", file)
	g.Expect(err).NotTo(HaveOccurred())
	_, c := controllerContainer(t, render(t, "extension-terraseed", "-f", file))
	g.Expect(c.Args).To(ContainElements("--provider-types=aws", "--concurrency=10", "--terraformer-image=ghcr.io/terraseed/terraseed:0.1.0",
		"--terraformer-priority-class-name=terraseed-runs"))
}
