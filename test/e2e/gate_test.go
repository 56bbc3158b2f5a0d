package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/terraseed/terraseed/test/realnode"
)

// gate is the API server as a cloud provider's API appears to terraform: a proxy on the
// node's host address that the pods reach over the bridge, which can slow every create
// down, or hold creates until it is opened, so that a test knows a run is under way
// and where. The pods speak plain HTTP to it without credentials; it forwards with a
// cluster-admin's.
type gate struct {
	url string

	mu sync.Mutex
	// pass is how many more creates go through before the gate holds them; negative:
	// all of them.
	pass int
	// open is closed when the gate opens.
	open    chan struct{}
	delay   time.Duration
	held    int
	creates int
}

func startGate(t *testing.T, config *rest.Config) *gate {
	t.Helper()
	target, err := url.Parse(config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(config)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{pass: -1, open: make(chan struct{})}
	close(g.open)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	listener, err := net.Listen("tcp", realnode.HostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	g.url = "http://" + listener.Addr().String()
	server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// The body is read first: only then does the server watch the connection, and
			// cancel the request's context when the client goes away while it is held.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if !g.admit(r.Context()) {
				// The client went away while held: a killed run's request never arrives.
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(func() {
		g.Open()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(ctx)
	})
	return g
}

// admit lets a create through once the gate allows it; false when the client gave up
// while it waited.
func (g *gate) admit(ctx context.Context) bool {
	g.mu.Lock()
	delay := g.delay
	open := g.open
	if g.pass > 0 {
		g.pass--
	} else if g.pass == 0 {
		g.held++
		g.mu.Unlock()
		select {
		case <-open:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.held--
	}
	g.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return false
		}
	}
	g.mu.Lock()
	g.creates++
	g.mu.Unlock()
	return true
}

// HoldAfter lets n more creates through, then holds every create until Open.
func (g *gate) HoldAfter(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pass >= 0 {
		close(g.open)
	}
	g.pass = n
	g.open = make(chan struct{})
}

// Open lets every create through, held ones first.
func (g *gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pass >= 0 {
		close(g.open)
	}
	g.pass = -1
}

// SlowDown delays every create by d.
func (g *gate) SlowDown(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.delay = d
}

// Held is how many creates wait for the gate to open.
func (g *gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// Creates is how many creates went through.
func (g *gate) Creates() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.creates
}

// Kubeconfig is a kubeconfig of the API server through the gate, for terraform.
func (g *gate) Kubeconfig() []byte {
	config := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"gate": {Server: g.url}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"anonymous": {}},
		Contexts:       map[string]*clientcmdapi.Context{"gate": {Cluster: "gate", AuthInfo: "anonymous"}},
		CurrentContext: "gate",
	}
	data, err := clientcmd.Write(config)
	if err != nil {
		panic(fmt.Sprintf("writing a kubeconfig: %v", err))
	}
	return data
}
