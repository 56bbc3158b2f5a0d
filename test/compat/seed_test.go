package compat_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	machinev1alpha1 "github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The seed of the gardenlet tests is a real kube-apiserver and etcd with terraseed's CRDs
// for Infrastructure, ControlPlane and Cluster and Gardener's CRDs for every other kind gardenlet reads,
// and terraseed's controller running against it as a process, as it runs in a seed. The
// garden side (gardener-apiserver) does not run here; a fake client stands in for it.
type seedCluster struct {
	env        *envtest.Environment
	client     client.Client
	kubeconfig []byte
	dir        string
	logPath    string

	controller *exec.Cmd
	// alive is cancelled when the controller exits, so that no test waits on a dead one.
	alive context.Context
	// exited is closed when the controller exited; exitErr says how.
	exited  chan struct{}
	exitErr error
}

var seed struct {
	once    sync.Once
	cluster *seedCluster
	err     error
}

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime; what it reports as errors it also returns.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if seed.cluster != nil {
		if err := seed.cluster.stop(code != 0); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the seed:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// seedScheme holds what gardenlet reads and writes in a seed.
func seedScheme() *k8sruntime.Scheme {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{
		clientgoscheme.AddToScheme, gardenextensionsv1alpha1.AddToScheme, machinev1alpha1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return scheme
}

// gardenScheme holds what gardenlet writes into the garden cluster.
func gardenScheme() *k8sruntime.Scheme {
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, gardencorev1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return scheme
}

// seedFor returns the seed, starting it on first use; the round-trip tests of this
// package need none of it.
func seedFor(t *testing.T) *seedCluster {
	t.Helper()
	seed.once.Do(func() { seed.cluster, seed.err = startSeed() })
	if seed.err != nil {
		t.Fatal(seed.err)
	}
	return seed.cluster
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func startSeed() (_ *seedCluster, err error) {
	for _, name := range []string{"KUBEBUILDER_ASSETS", "TERRASEED_TERRAFORM", "TERRASEED_PROVIDER_MIRROR"} {
		if os.Getenv(name) == "" {
			return nil, fmt.Errorf("%s is not set: run the tests with `make test`, or `make tools` and `eval \"$(make -s env)\"` first", name)
		}
	}
	dir, err := os.MkdirTemp("", "terraseed-compat-")
	if err != nil {
		return nil, err
	}
	s := &seedCluster{dir: dir, logPath: filepath.Join(dir, "controller.log"), exited: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = s.stop(false)
		}
	}()

	// The controller and the terraformer next to it, as the image installs them.
	for _, cmd := range []string{"terraseed", "terraformer"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", cmd), "./cmd/"+cmd)
		build.Dir = repoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building cmd/%s: %w\n%s", cmd, err, out)
		}
	}

	crds, err := crdPaths()
	if err != nil {
		return nil, err
	}
	scheme := seedScheme()
	s.env = &envtest.Environment{
		Scheme: scheme,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths: crds, ErrorIfPathMissing: true, MaxTime: 2 * time.Minute,
		},
	}
	cfg, err := s.env.Start()
	if err != nil {
		s.env = nil
		return nil, fmt.Errorf("starting the seed's control plane: %w", err)
	}
	if s.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	admin, err := s.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	if s.kubeconfig, err = admin.KubeConfig(); err != nil {
		return nil, err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, s.kubeconfig, 0o600); err != nil {
		return nil, err
	}
	return s, s.startController(kubeconfigPath)
}

// crdPaths are terraseed's CRDs and, from Gardener's module, the CRDs gardenlet installs
// in a seed for every other kind it lists when it computes a ShootState. Of two CRDs of one
// name envtest installs the last it read, so Gardener's is left out where terraseed has one.
func crdPaths() ([]string, error) {
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gardener/gardener")
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("finding Gardener's module: %w", err)
	}
	gardener := strings.TrimSpace(string(out))
	ours := filepath.Join(repoRoot(), "charts", "terraseed", "crds")
	paths := []string{ours}
	for _, plural := range []string{"backupentries", "containerruntimes", "controlplanes", "dnsrecords", "extensions", "networks", "operatingsystemconfigs", "selfhostedshootexposures", "workers"} {
		if _, err := os.Stat(filepath.Join(ours, "extensions.gardener.cloud_"+plural+".yaml")); err == nil {
			continue
		}
		paths = append(paths, filepath.Join(gardener, "pkg", "component", "extensions", "crds", "assets", "crd-extensions.gardener.cloud_"+plural+".yaml"))
	}
	for _, plural := range []string{"machinedeployments", "machinesets", "machines"} {
		paths = append(paths, filepath.Join(gardener, "pkg", "component", "nodemanagement", "machinecontrollermanager", "templates", "crd-machine.sapcloud.io_"+plural+".yaml"))
	}
	return paths, nil
}

// startController runs `terraseed run` with the local executor, serving
// every embedded provider and the test providers under testdata/providers.
func (s *seedCluster) startController(kubeconfigPath string) error {
	providers, err := filepath.Abs(filepath.Join("testdata", "providers"))
	if err != nil {
		return err
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	// The runs of BackupBuckets and BackupEntries, as the chart keeps them in its release's.
	runs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "terraseed"}}
	if err := s.client.Create(context.Background(), runs); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cmd := exec.Command(filepath.Join(s.dir, "bin", "terraseed"), "run",
		"--kubeconfig", kubeconfigPath, "--executor=local", "--runs-namespace", runs.Name,
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--work-dir", filepath.Join(s.dir, "work"), "--providers-dir", providers)
	cmd.Env = append(os.Environ(),
		"TERRASEED_TERRAFORM="+os.Getenv("TERRASEED_TERRAFORM"),
		"TERRASEED_PROVIDER_MIRROR="+os.Getenv("TERRASEED_PROVIDER_MIRROR"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting the controller: %w", err)
	}
	s.controller = cmd
	alive, cancel := context.WithCancel(context.Background())
	s.alive = alive
	go func() {
		s.exitErr = cmd.Wait()
		_ = logFile.Close()
		close(s.exited)
		cancel()
	}()
	return nil
}

// stop stops the controller as a seed does (SIGTERM: it saves the state of runs under
// way), then the control plane, and removes what the tests built.
func (s *seedCluster) stop(failed bool) error {
	var errs []error
	if s.controller != nil {
		_ = s.controller.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(2 * time.Minute):
			_ = s.controller.Process.Kill()
			<-s.exited
			errs = append(errs, errors.New("the controller did not stop within 2 minutes of SIGTERM"))
		}
	}
	if failed || len(errs) > 0 {
		printTail(s.logPath, 64<<10)
	}
	if s.env != nil {
		if err := s.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// controllerGone is nil while the controller runs, else an error saying how it ended.
func (s *seedCluster) controllerGone() error {
	select {
	case <-s.exited:
		return fmt.Errorf("the controller exited: %v", s.exitErr)
	default:
		return nil
	}
}

// logLines returns the controller's log lines that mention text.
func (s *seedCluster) logLines(text string) []string {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return nil
	}
	var lines []string
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for scanner.Scan() {
		if strings.Contains(scanner.Text(), text) {
			lines = append(lines, scanner.Text())
		}
	}
	return lines
}

func printTail(path string, size int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if len(data) > size {
		data = data[len(data)-size:]
	}
	fmt.Fprintf(os.Stderr, "---- the end of the controller's log:\n%s\n", data)
}
