package templates_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

// seedReader is a provider whose terraform and control-plane templates read the seed's
// region, or, guarded, only when the Cluster has a seed.
func seedReader(t *testing.T, guarded bool) *templates.Provider {
	t.Helper()
	read := `{{ .cluster.seed.spec.provider.region | toJson }}`
	if guarded {
		read = `{{ if hasKey .cluster "seed" }}{{ .cluster.seed.spec.provider.region | toJson }}{{ else }}"none"{{ end }}`
	}
	dir := t.TempDir()
	files := map[string]string{
		"provider.yaml":                  "type: seedreader\nresources: [terraform_data]\nstatus:\n  providerStatus:\n    apiVersion: seedreader/v1\n    kind: InfrastructureStatus\n    fields: {}\n",
		"schema.json":                    `{"type": "object"}`,
		"main.tf.tpl":                    "resource \"terraform_data\" \"x\" {\n  input = " + read + "\n}\n",
		"controlplane/controlplane.yaml": "networkPolicyLabels: {a: b}\n",
		"controlplane/schema.json":       `{"type": "object"}`,
		"controlplane/objects.yaml.tpl":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed\ndata:\n  region: " + read + "\n",
	}
	for name, content := range files {
		path := filepath.Join(dir, "seedreader", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := registry(t, dir).Provider("seedreader")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func clusterWithSeed(seed *runtime.RawExtension) *extensionsv1alpha1.Cluster {
	return &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{
		Shoot:        runtime.RawExtension{Raw: []byte(`{"spec":{"region":"local-1"}}`)},
		CloudProfile: runtime.RawExtension{Raw: []byte(`{}`)},
		Seed:         seed,
	}}
}

// A self-hosted shoot's Cluster has no seed: templates that read it fail naming
// cluster.spec.seed as invalid input, for the Infrastructure and the ControlPlane alike;
// templates that guard the read, and those that do not read the seed, render.
func TestATemplateReadingAnAbsentSeedNamesTheField(t *testing.T) {
	seeded := clusterWithSeed(&runtime.RawExtension{Raw: []byte(`{"spec":{"provider":{"region":"seed-region"}}}`)})
	renderInfra := func(p *templates.Provider, c *extensionsv1alpha1.Cluster) (string, error) {
		out, err := p.Render(templates.Input{Infrastructure: infrastructure("seedreader", `{}`), Cluster: c})
		if err != nil {
			return "", err
		}
		return out.Files["main.tf"], nil
	}
	renderControlPlane := func(p *templates.Provider, c *extensionsv1alpha1.Cluster) (string, error) {
		out, err := p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: controlPlane("seedreader", `{}`), Cluster: c})
		if err != nil {
			return "", err
		}
		region, _, _ := unstructured.NestedString(out.Objects[0].Object, "data", "region")
		return region, nil
	}
	for name, render := range map[string]func(*templates.Provider, *extensionsv1alpha1.Cluster) (string, error){
		"infrastructure": renderInfra, "control plane": renderControlPlane,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			reader := seedReader(t, false)
			out, err := render(reader, seeded)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("seed-region"))

			for _, absent := range map[string]*runtime.RawExtension{"unset": nil, "null": {Raw: []byte("null")}} {
				_, err = render(reader, clusterWithSeed(absent))
				var invalid *templates.ValidationError
				g.Expect(errors.As(err, &invalid)).To(BeTrue(), "a ValidationError, got %v", err)
				g.Expect(invalid.Errors).To(HaveLen(1))
				g.Expect(invalid.Errors[0].Field).To(Equal("cluster.spec.seed"))
				g.Expect(invalid.Errors[0].Type).To(Equal(field.ErrorTypeRequired))
				g.Expect(err.Error()).To(ContainSubstring("the Cluster has no seed (a self-hosted shoot"))
				g.Expect(err.Error()).To(ContainSubstring(`hasKey .cluster "seed"`))
			}

			guarded := seedReader(t, true)
			out, err = render(guarded, clusterWithSeed(nil))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("none"))
			out, err = render(guarded, seeded)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring("seed-region"))
		})
	}
}

// Without any Cluster (tests, `make run`) the seed is an empty object, as before.
func TestWithoutAClusterTheSeedIsEmpty(t *testing.T) {
	g := NewWithT(t)
	_, err := seedReader(t, false).Render(templates.Input{Infrastructure: infrastructure("seedreader", `{}`)})
	var rendering *templates.RenderError
	g.Expect(errors.As(err, &rendering)).To(BeTrue(), "reading a field of the empty seed is the template's mistake, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`map has no entry for key "spec"`))
}
