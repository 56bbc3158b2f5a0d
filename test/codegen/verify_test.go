package codegen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func repositoryRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// copyTree copies the parts of the module that code generation reads and writes.
func copyModule(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, path := range []string{"go.mod", "go.sum", "api", "charts/terraseed/crds", "test/tools/verify-generated.sh"} {
		src := filepath.Join(repositoryRoot(), path)
		target := filepath.Join(dst, path)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", src, target).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v: %s", path, err, out)
		}
	}
	return dst
}

func verify(t *testing.T, dir string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "test/tools/verify-generated.sh", ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestVerifyGeneratedFiles(t *testing.T) {
	if os.Getenv("CONTROLLER_GEN") == "" {
		t.Fatal("CONTROLLER_GEN is not set: run with `make test`, or `eval \"$(make -s env)\"` first")
	}

	t.Run("passes on the committed tree", func(t *testing.T) {
		g := NewWithT(t)
		out, err := verify(t, copyModule(t))
		g.Expect(err).NotTo(HaveOccurred(), out)
	})

	t.Run("fails after a type change without regeneration and leaves the tree alone", func(t *testing.T) {
		g := NewWithT(t)
		dir := copyModule(t)
		types := filepath.Join(dir, "api", "v1alpha1", "types_infrastructure.go")
		src, err := os.ReadFile(types)
		g.Expect(err).NotTo(HaveOccurred())
		changed := strings.Replace(string(src),
			"\tEgressCIDRs []string `json:\"egressCIDRs,omitempty\"`\n",
			"\tEgressCIDRs []string `json:\"egressCIDRs,omitempty\"`\n\t// +optional\n\tExtra []string `json:\"extra,omitempty\"`\n", 1)
		g.Expect(changed).NotTo(Equal(string(src)), "the type to change was not found")
		g.Expect(os.WriteFile(types, []byte(changed), 0o644)).To(Succeed())
		deepcopy := filepath.Join(dir, "api", "v1alpha1", "zz_generated.deepcopy.go")
		before, err := os.ReadFile(deepcopy)
		g.Expect(err).NotTo(HaveOccurred())

		out, err := verify(t, dir)
		g.Expect(err).To(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("stale generated file(s) under api/v1alpha1/zz_generated.deepcopy.go"))
		g.Expect(out).To(ContainSubstring("stale generated file(s) under charts/terraseed/crds"))

		after, err := os.ReadFile(deepcopy)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(after)).To(Equal(string(before)), "verify must not rewrite generated files")
	})
}
