package terraformer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// stateOfSerial is a state document as terraform writes it, of one lineage.
func stateOfSerial(serial int) []byte {
	return fmt.Appendf(nil, `{"version":4,"terraform_version":%q,"serial":%d,"lineage":"6f1a1c52-0b7e-4a55-9d0b-1f2f3a4b5c6d","outputs":{},"resources":[]}`+"\n", TerraformVersion, serial)
}

// Every state terraform writes is saved as it is written, not at most once a second: a
// run killed right after terraform recorded a resource has it in the stored state. The
// writes of a burst collapse into fewer saves, the newest one last; a file caught in the
// middle of a write is skipped until the rest of it is written. All of it before the
// run's final save, which a killed run never makes.
func TestStateWatcherSavesEveryWriteAsItIsWritten(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := state.RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "infra", Purpose: run.PurposeInfra}}
	store := objects.Store(env.Client)
	_, err := store.Claim(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), state.Key)
	watcher, err := watchState(ctx, path, store, 0)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(watcher.stop)
	stored := func() int64 {
		data, err := objects.ReadState(ctx, env.Client)
		g.Expect(err).NotTo(HaveOccurred())
		var s struct{ Serial int64 }
		_ = json.Unmarshal(data, &s)
		return s.Serial
	}

	g.Expect(os.WriteFile(path, stateOfSerial(1), 0o600)).To(Succeed())
	g.Eventually(stored).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeEquivalentTo(1))
	written := time.Now()
	g.Expect(os.WriteFile(path, stateOfSerial(2), 0o600)).To(Succeed())
	g.Eventually(stored).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeEquivalentTo(2))
	took := time.Since(written)
	t.Logf("the write right after a save was saved %s after it", took.Round(time.Millisecond))
	g.Expect(took).To(BeNumerically("<", 500*time.Millisecond), "saved as it was written, with no wait for a second to pass since the last save")

	// A burst, each write in place in two parts, as terraform writes: the first part is
	// no state yet.
	const last = 200
	before := store.Writes()
	for serial := 3; serial <= last; serial++ {
		writeInTwoParts(g, path, stateOfSerial(serial), nil)
	}
	g.Eventually(stored).WithTimeout(10*time.Second).WithPolling(5*time.Millisecond).Should(BeEquivalentTo(last), "the newest state of the burst is saved")
	t.Logf("%d writes of the burst made %d saves", last-2, store.Writes()-before)
	g.Expect(store.Writes()-before).To(BeNumerically("<", last-2), "writes during a save collapse into the next one")

	// A file caught in the middle of a write is not saved; the rest of the write is.
	writeInTwoParts(g, path, stateOfSerial(last+1), func() {
		g.Consistently(stored).WithTimeout(300 * time.Millisecond).Should(BeEquivalentTo(last))
	})
	g.Eventually(stored).WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeEquivalentTo(last + 1))
}

// writeInTwoParts rewrites the file in place, its first half, then (after between, when
// set) the rest.
func writeInTwoParts(g Gomega, path string, content []byte, between func()) {
	g.Expect(os.WriteFile(path, content[:len(content)/2], 0o600)).To(Succeed())
	if between != nil {
		between()
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = f.Write(content[len(content)/2:])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Close()).To(Succeed())
}
