package terraform

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

func TestMirroredProvidersBypassThePluginCache(t *testing.T) {
	g := NewWithT(t)
	mirror := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(mirror, "registry.terraform.io", "gavinbunney", "kubectl"), 0o755)).To(Succeed())

	// Mirror only: linked from the mirror, so no cache that one run's init could replace
	// under another run's apply.
	config, err := Plugins{Mirror: mirror, CacheDir: "/cache"}.cliConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(config).NotTo(ContainSubstring("plugin_cache_dir"))
	g.Expect(config).To(ContainSubstring(`filesystem_mirror {` + "\n" + `    path = "` + mirror + `"`))
	g.Expect(config).NotTo(ContainSubstring("direct"))

	// Downloads allowed: downloaded providers go through the cache; mirrored ones never download.
	config, err = Plugins{Mirror: mirror, CacheDir: "/cache", AllowDownload: true}.cliConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(config).To(ContainSubstring(`plugin_cache_dir = "/cache"`))
	g.Expect(config).To(ContainSubstring(`exclude = ["registry.terraform.io/gavinbunney/kubectl"]`))
}
