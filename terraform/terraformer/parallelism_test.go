package terraformer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
)

// concurrentConfig is three independent resources whose creation notes how many of them
// are being created at that moment.
const concurrentConfig = `
variable "dir" {
  type = string
}

resource "terraform_data" "work" {
  count = 3
  provisioner "local-exec" {
    command = "touch \"$DIR/$N.on\" && ls \"$DIR\" | grep -c '[.]on$' >> \"$DIR/seen\"; sleep 1; rm \"$DIR/$N.on\""
    environment = {
      DIR = var.dir
      N   = count.index
    }
  }
}
`

// mostAtOnce applies the concurrent configuration with that parallelism and returns the
// most creations seen under way at once.
func mostAtOnce(t *testing.T, parallelism int) int {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t, 0)
	dir := t.TempDir()
	g.Expect(f.Objects.WriteConfig(ctx, env.Client, map[string]string{"main.tf": concurrentConfig})).To(Succeed())
	vars, err := json.Marshal(map[string]string{"dir": dir})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Objects.WriteVars(ctx, env.Client, vars)).To(Succeed())
	f.settings.Parallelism = parallelism
	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	seen, err := os.ReadFile(filepath.Join(dir, "seen"))
	g.Expect(err).NotTo(HaveOccurred())
	var counts []int
	for _, line := range strings.Fields(string(seen)) {
		n, err := strconv.Atoi(line)
		g.Expect(err).NotTo(HaveOccurred())
		counts = append(counts, n)
	}
	g.Expect(counts).To(HaveLen(3))
	return slices.Max(counts)
}

// A provider's parallelism reaches terraform: one at a time where it says 1, beside
// terraform's default that creates the three at once.
func TestARequestsParallelismBoundsTerraformsConcurrentChanges(t *testing.T) {
	g := NewWithT(t)
	g.Expect(mostAtOnce(t, 1)).To(Equal(1))
	g.Expect(mostAtOnce(t, 0)).To(BeNumerically(">", 1), "terraform's default runs them side by side")
}
