package executor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
)

// A local run runs as the controller's user in its process: terraform and its provider
// plugins get a HOME and a TMPDIR of the run's own, under its run directory, and leave
// nothing in the controller's (the kubectl provider writes its caches into ~/.kube).
func TestALocalRunHasItsOwnHomeAndTemporaryDirectory(t *testing.T) {
	g := NewWithT(t)
	// A short TMPDIR: the plugins' socket paths under it are bounded.
	home, tmp := t.TempDir(), shortTempDir(t)
	t.Setenv("HOME", home)
	t.Setenv("TMPDIR", tmp)
	f := newFixture(t, 1)
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	for _, dir := range []string{home, tmp} {
		entries, err := os.ReadDir(dir)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).To(BeEmpty(), "nothing written into the controller's %s", dir)
	}

	runDir := filepath.Join(f.executor.BaseDir, f.Objects.ID.Dir())
	g.Expect(filepath.Join(runDir, "home", ".kube")).To(BeADirectory(), "the kubectl provider's caches, in the run's HOME")
	env := runEnv(homeOf(runDir), "/tmp/terraseed-run-1", map[string]string{"TF_VAR_x": "y"})
	g.Expect(env).To(ContainElements("HOME="+filepath.Join(runDir, "home"), "TMPDIR=/tmp/terraseed-run-1", "TF_VAR_x=y"))
	for _, kv := range env {
		g.Expect(strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "TF_VAR_")).To(BeTrue(), kv)
	}
}

func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
