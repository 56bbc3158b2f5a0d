package terraformer

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
)

// countingProxy relays TCP connections to the API server, TLS and all, and counts them.
func countingProxy(t *testing.T, upstream string) (address string, accepted *atomic.Int32) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	accepted = &atomic.Int32{}
	var relays sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			down, err := listener.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = down.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, down, up)
			mu.Unlock()
			relays.Add(2)
			go func() { defer relays.Done(); _, _ = io.Copy(up, down); _ = up.Close() }()
			go func() { defer relays.Done(); _, _ = io.Copy(down, up); _ = down.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = listener.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		relays.Wait()
	})
	return listener.Addr().String(), accepted
}

// A terraformer process reads its configuration, variables and state side by side over
// one connection to the API server, and keeps to it: a connection of its own for each
// first request would cost a TLS handshake on both sides.
func TestATerraformerProcessOpensOneConnectionToTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 2)
	server, err := url.Parse(env.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	proxy, accepted := countingProxy(t, server.Host)
	// The API server's certificate is for 127.0.0.1, where the proxy listens too.
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + proxy
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(tftest.WriteKubeconfig(cfg, kubeconfig)).To(Succeed())

	cmd, _ := f.startTerraformerWith(nil, run.Apply, []string{"--kubeconfig", kubeconfig}, nil)
	g.Expect(cmd.Wait()).To(Succeed())
	f.ExpectEachItemOnceInState(g, 2)
	g.Expect(accepted.Load()).To(Equal(int32(1)))
}
