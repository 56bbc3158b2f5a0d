package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/terraseed/terraseed/api/scheme"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
)

// ErrAssetsMissing is returned when the control-plane binaries were not built.
var ErrAssetsMissing = errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or `make tools` and `eval \"$(make -s env)\"` first")

// Environment is a running control plane with the CRDs installed and a client for it.
type Environment struct {
	// env is nil for a control plane this package did not start (Attach).
	env *envtest.Environment
	// kubeconfig is a cluster-admin's kubeconfig of an attached control plane.
	kubeconfig []byte
	crds       []schema.GroupKind
	Config     *rest.Config
	Scheme     *k8sruntime.Scheme
	Client     client.Client
}

// CRDDirectory is where the generated CRDs live: the Helm chart's crds directory.
func CRDDirectory() string {
	return filepath.Join(moduleRoot(), "charts", "terraseed", "crds")
}

// Start starts kube-apiserver and etcd and installs the CRDs; a missing CRD directory is an error.
func Start() (*Environment, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, ErrAssetsMissing
	}
	s := scheme.New()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{CRDDirectory()},
		ErrorIfCRDPathMissing: true,
		Scheme:                s,
	}
	// A seed may cap the tokens its API server gives; a test asks for a longer one to see
	// what a capped token does.
	env.ControlPlane.GetAPIServer().Configure().Set("service-account-max-token-expiration", "2h")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return &Environment{env: env, Config: cfg, Scheme: s, Client: c}, nil
}

// Attach installs the CRDs into a control plane started elsewhere (a real node's, see
// test/realnode), of which kubeconfig is a cluster-admin's, and returns it as an
// Environment; Stop leaves it running.
func Attach(cfg *rest.Config, kubeconfig []byte) (*Environment, error) {
	s := scheme.New()
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{CRDDirectory()}, ErrorIfPathMissing: true, Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("installing the CRDs: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	e := &Environment{Config: cfg, Scheme: s, Client: c, kubeconfig: kubeconfig}
	for _, crd := range crds {
		e.crds = append(e.crds, schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind})
	}
	return e, nil
}

// Stop stops the control plane, unless it was attached.
func (e *Environment) Stop() error {
	if e.env == nil {
		return nil
	}
	return e.env.Stop()
}

// CRDs returns the group-versioned kinds installed from the CRD directory.
func (e *Environment) CRDs() []schema.GroupKind {
	if e.env == nil {
		return e.crds
	}
	var kinds []schema.GroupKind
	for _, crd := range e.env.CRDs {
		kinds = append(kinds, schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind})
	}
	return kinds
}

// Run is the body of a TestMain: it starts the environment into *env, then each extra
// component (a controller manager, ...), runs the tests and stops everything again,
// returning the exit code.
func Run(m *testing.M, env **Environment, extras ...func(*Environment) (stop func() error, err error)) int {
	started, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return RunIn(m, started, env, extras...)
}

// RunIn is Run in an environment started already (Attach).
func RunIn(m *testing.M, started *Environment, env **Environment, extras ...func(*Environment) (stop func() error, err error)) int {
	*env = started
	var stops []func() error
	code := 0
	for _, extra := range extras {
		stop, err := extra(started)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			break
		}
		stops = append(stops, stop)
	}
	if code == 0 {
		code = m.Run()
	}
	removeBuilt()
	for i := len(stops) - 1; i >= 0; i-- {
		if err := stops[i](); err != nil {
			fmt.Fprintln(os.Stderr, "stopping:", err)
		}
	}
	if err := started.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Namespace creates a namespace for one test and deletes it when the test ends.
func (e *Environment) Namespace(t testing.TB) string {
	t.Helper()
	return e.LabelledNamespace(t, nil)
}

// LabelledNamespace is Namespace with labels set when it is created. Labels patched on
// later reach the API server's own namespace cache a moment after the patch returns, so
// admission webhooks selecting on them could still pass over a request made right after.
func (e *Environment) LabelledNamespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-", Labels: labels}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		// envtest runs no namespace controller, so the namespace only ends up terminating;
		// its name is unique, so nothing leaks into the next test.
		_ = e.Client.Delete(context.Background(), ns)
	})
	return ns.Name
}

// AdminKubeconfig returns a kubeconfig of a new cluster-admin user of this control plane.
func (e *Environment) AdminKubeconfig() ([]byte, error) {
	if e.env == nil {
		return e.kubeconfig, nil
	}
	user, err := e.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// EtcdURL is the address of the control plane's etcd, which serves plain HTTP on this
// machine; another kube-apiserver may use it under its own --etcd-prefix.
func (e *Environment) EtcdURL() string {
	return e.env.ControlPlane.Etcd.URL.String()
}
