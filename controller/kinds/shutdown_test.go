package kinds_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// slowStateWrites is the API server behind a proxy that holds every update of one state
// ConfigMap for a while before passing it on, as an API server under load does: a save
// takes longer than controller-runtime's default graceful shutdown of 30 s. An update
// whose client went away is dropped.
func slowStateWrites(t *testing.T, stateName string, delay time.Duration) (kubeconfig string) {
	t.Helper()
	g := NewWithT(t)
	target, err := url.Parse(env.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.FlushInterval = -1
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/configmaps/"+stateName) {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	config := clientcmdapi.NewConfig()
	config.Clusters["proxy"] = &clientcmdapi.Cluster{Server: server.URL}
	config.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	config.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	config.CurrentContext = "proxy"
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(clientcmd.WriteToFile(*config, kubeconfig)).To(Succeed())
	return kubeconfig
}

// A SIGTERM of the controller process (a rolling update) in the middle of an apply loses
// nothing: the process waits for terraform to stop and for the final save of the state,
// however slow the API server is to take it (within the stop and save timeouts), before
// it exits, and the stored state lists every object the apply created.
func TestSIGTERMOfTheControllerMidApplyLosesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	binary := testenv.ControllerBinary(t)
	s := slowLocalShoot(t, 3, 2)
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
	// Longer than the 30 s controller-runtime gives runnables to stop by default.
	kubeconfig := slowStateWrites(t, objects.StateName(), 32*time.Second)

	controller := exec.Command(binary, "run", "--kubeconfig", kubeconfig, "--executor=local",
		"--terraform", testenv.Terraform(t), "--plugin-mirror", testenv.ProviderMirror(t), "--work-dir", t.TempDir(),
		"--providers-dir", "testdata/providers", "--provider-types=slowlocal",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--drift-interval=0")
	output := &testenv.SyncBuffer{}
	controller.Stdout, controller.Stderr = output, output
	g.Expect(controller.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- controller.Wait() }()
	t.Cleanup(func() {
		_ = controller.Process.Kill()
		if t.Failed() {
			t.Logf("controller output:\n%s", output.String())
		}
	})

	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	// The second step's object exists: at least one save of the state is still held.
	s.waitForStep(t, 1)
	g.Expect(controller.Process.Signal(syscall.SIGTERM)).To(Succeed())
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(4 * time.Minute):
		t.Fatal("the controller did not exit within its shutdown timeout")
	}

	stored, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	for _, step := range s.stepsLeft(g) {
		address := "step_" + strings.TrimPrefix(step, "step-")
		g.Expect(string(stored)).To(ContainSubstring(`"name": "`+address+`"`), "the stored state lists %s, which the apply created", address)
	}
	g.Expect(exitErr).NotTo(HaveOccurred(), "the controller exits once its runs stopped and saved, not at the end of a shorter grace period")
	g.Expect(s.get(g).Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateProcessing), "a shutdown is no failure of the operation")
}
