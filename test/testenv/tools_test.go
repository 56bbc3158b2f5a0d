package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
)

// A build of a test process that is gone is removed by the next build; the builds of live
// processes, and what is not a build, are left alone.
func TestTheBuildsOfGoneProcessesAreRemoved(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("TMPDIR", t.TempDir())
	gone := exec.Command("true")
	g.Expect(gone.Run()).To(Succeed())
	prefix := "terraseed-terraseed-"
	dirs := map[string]bool{
		prefix + strconv.Itoa(gone.Process.Pid) + "-123": false,
		prefix + strconv.Itoa(os.Getpid()) + "-456":      true,
		prefix + "789": true,
		"terraseed-terraformer-" + strconv.Itoa(gone.Process.Pid) + "-1": true,
	}
	for dir := range dirs {
		g.Expect(os.MkdirAll(filepath.Join(os.TempDir(), dir, "sub"), 0o700)).To(Succeed())
	}

	removeAbandoned(prefix)
	for dir, kept := range dirs {
		_, err := os.Stat(filepath.Join(os.TempDir(), dir))
		if kept {
			g.Expect(err).NotTo(HaveOccurred(), dir)
		} else {
			g.Expect(os.IsNotExist(err)).To(BeTrue(), "%s: %v", dir, err)
		}
	}
}
