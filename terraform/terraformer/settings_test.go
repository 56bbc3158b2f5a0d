package terraformer

import (
	"flag"
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A run pod's arguments carry the executor's settings to its terraformer whole.
func TestSettingsReachARunPodAsTheyAre(t *testing.T) {
	g := NewWithT(t)
	settings := Settings{
		Terraform:        "/usr/local/bin/tofu",
		OpenTofu:         true,
		Plugins:          Plugins{Mirror: "/opt/terraseed/plugins", CacheDir: "/tmp/plugin-cache", AllowDownload: true},
		Parallelism:      3,
		StopTimeout:      45 * time.Second,
		ProgressInterval: 200 * time.Millisecond,
	}
	flags := flag.NewFlagSet("apply", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	var parsed Settings
	parsed.bindFlags(flags)
	g.Expect(flags.Parse(settings.Args())).To(Succeed())
	g.Expect(parsed).To(Equal(settings))

	g.Expect(Settings{}.Args()).To(BeEmpty(), "the defaults are left out")
	g.Expect(Settings{StopTimeout: DefaultStopTimeout}.Args()).To(BeEmpty(), "the defaults are left out")
}
