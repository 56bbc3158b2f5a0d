package terraformer

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/test/testenv"
)

func TestMirroredProvidersBypassThePluginCache(t *testing.T) {
	g := NewWithT(t)
	mirror := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(mirror, "registry.terraform.io", "gavinbunney", "kubectl"), 0o755)).To(Succeed())

	// Mirror only: linked from the mirror, so no cache that one run's init could replace
	// under another run's apply.
	config, err := plugins{Mirror: mirror, CacheDir: "/cache"}.cliConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(config).NotTo(ContainSubstring("plugin_cache_dir"))
	g.Expect(config).To(ContainSubstring(`filesystem_mirror {` + "\n" + `    path = "` + mirror + `"`))
	g.Expect(config).NotTo(ContainSubstring("direct"))

	// Downloads allowed: downloaded providers go through the cache; mirrored ones never download.
	config, err = plugins{Mirror: mirror, CacheDir: "/cache", AllowDownload: true}.cliConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(config).To(ContainSubstring(`plugin_cache_dir = "/cache"`))
	g.Expect(config).To(ContainSubstring(`exclude = ["registry.terraform.io/gavinbunney/kubectl"]`))
}

func TestRunsNeverCallHashiCorpsVersionCheck(t *testing.T) {
	g := NewWithT(t)
	path, err := plugins{Mirror: testenv.ProviderMirror(t)}.writeCLIConfig(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	version := exec.Command(testenv.Terraform(t), "version", "-json")
	version.Dir = t.TempDir()
	version.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE=" + path, "TF_LOG=INFO"}
	out, err := version.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("Checkpoint disabled. Not running."))
}
