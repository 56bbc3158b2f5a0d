package templates_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terraseed/terraseed/templates"
)

// TestGolden renders every case and compares it with testdata/golden; `go test -update`
// rewrites the golden files, which are then reviewed by eye like any other change.
func TestGolden(t *testing.T) {
	r := registry(t)
	for _, provider := range []string{"local", "aws"} {
		for _, c := range cases(t, provider) {
			t.Run(provider+"/"+c.name, func(t *testing.T) {
				g := NewWithT(t)
				out := render(t, r, c)
				files := map[string]string{"terraform.tfvars.json": string(out.TFVarsJSON)}
				for name, content := range out.Files {
					files[name] = content
				}
				if secret := c.secret(t); secret != nil {
					files["environment"] = environment(t, r, c, secret)
				}
				dir := filepath.Join("testdata", "golden", provider, c.name)
				if *update {
					g.Expect(os.RemoveAll(dir)).To(Succeed())
					g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
					for name, content := range files {
						g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)).To(Succeed())
					}
				}
				entries, err := os.ReadDir(dir)
				g.Expect(err).NotTo(HaveOccurred(), "run `go test ./templates/... -update` to create the golden files")
				var golden []string
				for _, e := range entries {
					golden = append(golden, e.Name())
				}
				var rendered []string
				for name := range files {
					rendered = append(rendered, name)
				}
				sort.Strings(rendered)
				g.Expect(rendered).To(Equal(golden), "the set of rendered files changed")
				for name, content := range files {
					want, err := os.ReadFile(filepath.Join(dir, name))
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(content).To(Equal(string(want)), "%s differs from its golden file; rerun with -update and review the diff", name)
				}
			})
		}
	}
}

// environment is what a run of the case's secret gets in its environment, one variable a
// line: the values of the credentials, and for a file its key (the executor gives the
// path).
func environment(t testing.TB, r *templates.Registry, c renderCase, secret *corev1.Secret) string {
	t.Helper()
	p, err := r.Provider(c.provider)
	if err != nil {
		t.Fatal(err)
	}
	env, err := p.Credentials(secret)
	if err != nil {
		t.Fatalf("%s/%s: %v", c.provider, c.name, err)
	}
	lines := make([]string, 0, len(env))
	for name, value := range env {
		lines = append(lines, name+"="+value)
	}
	for name, key := range p.CredentialFiles(secret) {
		lines = append(lines, fmt.Sprintf("%s=<the path of a file holding key %q>", name, key))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
