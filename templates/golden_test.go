package templates_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
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
