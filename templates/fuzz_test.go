package templates_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/templates"
)

// FuzzRender: any providerConfig either renders or fails with a typed error; nothing panics.
func FuzzRender(f *testing.F) {
	r := registry(f)
	for _, provider := range []string{"local", "aws"} {
		for _, c := range cases(f, provider) {
			data, err := os.ReadFile(filepath.Join(c.dir, "infrastructure.yaml"))
			if err != nil {
				f.Fatal(err)
			}
			var doc struct {
				Spec struct {
					ProviderConfig any `json:"providerConfig"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(data, &doc); err != nil {
				f.Fatal(err)
			}
			config, _ := yaml.Marshal(doc.Spec.ProviderConfig)
			json, _ := yaml.YAMLToJSON(config)
			f.Add(provider, string(json))
		}
	}
	f.Add("aws", `{"networks": {"vpc": {"id": "vpc-1"}, "zones": [{}]}}`)
	f.Add("local", `{"networks": {"zones": [null, 1, "x"]}}`)

	f.Fuzz(func(t *testing.T, provider, config string) {
		p, err := r.Provider(provider)
		if err != nil {
			return
		}
		in := templates.Input{Infrastructure: infrastructure(provider, config)}
		if _, err := p.Render(in); err != nil {
			var verr *templates.ValidationError
			var rerr *templates.RenderError
			if !errors.As(err, &verr) && !errors.As(err, &rerr) {
				t.Fatalf("untyped error: %v", err)
			}
			if rerr != nil {
				t.Fatalf("input passed validation but the templates failed: %v", err)
			}
		}
		in.Infrastructure.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(config)}
		_, _ = p.RenderUnvalidated(in)
	})
}
