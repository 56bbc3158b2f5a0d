package templates_test

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// renderCase is one directory under testdata/cases/<provider>/: infrastructure.yaml and,
// optionally, cluster.yaml and the credentials secret.yaml (its kind chooses the
// provider's credentials).
type renderCase struct {
	provider, name, dir string
}

func cases(t testing.TB, provider string) []renderCase {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "cases", provider, "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases for %s: %v", provider, err)
	}
	sort.Strings(dirs)
	var out []renderCase
	for _, dir := range dirs {
		out = append(out, renderCase{provider: provider, name: filepath.Base(dir), dir: dir})
	}
	return out
}

func (c renderCase) input(t testing.TB) templates.Input {
	t.Helper()
	in := templates.Input{Infrastructure: &extensionsv1alpha1.Infrastructure{}}
	readYAML(t, filepath.Join(c.dir, "infrastructure.yaml"), in.Infrastructure)
	if _, err := os.Stat(filepath.Join(c.dir, "cluster.yaml")); err == nil {
		in.Cluster = &extensionsv1alpha1.Cluster{}
		readYAML(t, filepath.Join(c.dir, "cluster.yaml"), in.Cluster)
	}
	in.WorkloadIdentity = templates.IsWorkloadIdentity(c.secret(t))
	return in
}

// secret is the case's credentials secret; nil when it has none.
func (c renderCase) secret(t testing.TB) *corev1.Secret {
	t.Helper()
	if _, err := os.Stat(filepath.Join(c.dir, "secret.yaml")); err != nil {
		return nil
	}
	secret := &corev1.Secret{}
	readYAML(t, filepath.Join(c.dir, "secret.yaml"), secret)
	for key, value := range secret.StringData {
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[key] = []byte(value)
	}
	return secret
}

func readYAML(t testing.TB, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func registry(t testing.TB, dirs ...string) *templates.Registry {
	t.Helper()
	r, err := templates.NewRegistry(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func render(t testing.TB, r *templates.Registry, c renderCase) *templates.Rendered {
	t.Helper()
	in := c.input(t)
	p, err := r.Provider(in.Infrastructure.Spec.Type)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Render(in)
	if err != nil {
		t.Fatalf("%s/%s: %v", c.provider, c.name, err)
	}
	return out
}
