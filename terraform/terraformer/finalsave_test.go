package terraformer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// cuttableAPIServer is the test API server behind a proxy that refuses every connection
// once cut: an API server that became unreachable. It returns the kubeconfig of the proxy
// and what cuts it.
func cuttableAPIServer(t *testing.T) (kubeconfig string, cut func()) {
	t.Helper()
	g := NewWithT(t)
	target, err := url.Parse(env.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.FlushInterval = -1
	var unreachable atomic.Bool
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unreachable.Load() {
			// The connection is dropped without an answer.
			panic(http.ErrAbortHandler)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(tftest.WriteKubeconfig(&rest.Config{Host: server.URL}, kubeconfig)).To(Succeed())
	return kubeconfig, func() {
		unreachable.Store(true)
		server.CloseClientConnections()
	}
}

// A run pod whose final save fails, the API server unreachable, never prints the state to
// its log, which goes to the seed's logging stack, secrets and all: it retries as long as
// --final-save-timeout allows, then fails naming the save's error, and its output holds
// nothing of the state.
func TestAFailedFinalSaveNeverPrintsTheState(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 0)
	gate := f.NewGate(1)
	f.WriteChainConfig(2, gate)
	kubeconfig, cut := cuttableAPIServer(t)
	// terraform's kubectl provider reaches the API server directly; the terraformer, which
	// saves the state, through the proxy.
	t.Setenv("TF_VAR_kubeconfig", f.Kubeconfig)
	t.Setenv("HOME", f.home)
	t.Setenv("TMPDIR", f.tmp)

	var stdout, stderr testenv.SyncBuffer
	exited := make(chan int, 1)
	const finalSaveTimeout = 3 * time.Second
	go func() {
		exited <- Main(context.Background(), []string{"apply",
			"--namespace", f.Namespace, "--name", f.Objects.ID.Name,
			"--kubeconfig", kubeconfig, "--work-dir", f.workDir,
			"--terraform", f.settings.Terraform, "--plugin-mirror", f.settings.Plugins.Mirror,
			"--report-file", f.reportFile, "--final-save-timeout", finalSaveTimeout.String(),
			"--termination-message-path", filepath.Join(t.TempDir(), "termination-log"),
		}, &stdout, &stderr)
	}()
	gate.WaitUntilReached()
	stored, err := f.Objects.ReadState(context.Background(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	var meta struct{ Lineage string }
	g.Expect(json.Unmarshal(stored, &meta)).To(Succeed())
	g.Expect(meta.Lineage).NotTo(BeEmpty())

	cut()
	started := time.Now()
	gate.Open()
	var code int
	g.Eventually(exited).WithTimeout(2 * time.Minute).Should(Receive(&code))
	t.Logf("stderr:\n%s", stderr.String())
	g.Expect(code).To(Equal(1))
	g.Expect(time.Since(started)).To(BeNumerically(">=", finalSaveTimeout), "the save was retried for as long as the timeout allows")
	for name, output := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		g.Expect(strings.Contains(output, meta.Lineage)).To(BeFalse(), "%s holds the state's lineage", name)
		g.Expect(strings.Contains(output, `"live_uid"`)).To(BeFalse(), "%s holds a resource's attributes", name)
		g.Expect(strings.Contains(output, `"resources"`)).To(BeFalse(), "%s holds the state", name)
	}
	g.Expect(stderr.String()).To(ContainSubstring("the terraform state could not be saved: retried for the final save timeout of 3s: "))
	// The state the save could not store stays in the working directory.
	local, err := os.ReadFile(filepath.Join(f.workDir, state.Key))
	g.Expect(err).NotTo(HaveOccurred())
	after, err := f.Objects.ReadState(context.Background(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	var unsaved, saved struct{ Serial int64 }
	g.Expect(json.Unmarshal(local, &unsaved)).To(Succeed())
	g.Expect(json.Unmarshal(after, &saved)).To(Succeed())
	g.Expect(saved.Serial).To(BeNumerically("<", unsaved.Serial), "the final state was not saved")
}
