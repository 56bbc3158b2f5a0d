package kinds_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
	"github.com/terraseed/terraseed/test/testenv"
)

var (
	env        *testenv.Environment
	kubeconfig []byte
)

func TestMain(m *testing.M) {
	endLog := testenv.LogControllersToFile()
	code := testenv.Run(m, &env)
	endLog(code != 0)
	os.Exit(code)
}

// controllerUnderTest is a manager running the Infrastructure controller for one namespace.
type controllerUnderTest struct {
	cancel context.CancelFunc
	done   chan error
	// output collects what the terraformer processes of this controller printed.
	output *testenv.SyncBuffer
	// cached reads the manager's cache.
	cached client.Reader
	// served are the kinds served besides the Infrastructure (controllerSetup.Kinds).
	served []string
}

// startController runs the controller with the local executor; runs keep their working
// directories in workDir, so that a second controller on the same workDir is a restart.
func startController(t testing.TB, namespace, workDir string) *controllerUnderTest {
	return startControllerWith(t, namespace, workDir, env.Config, 2)
}

// controllerSetup is what a test may change of a controller under test before it starts:
// its actuator, its executor, and the settings of its run pipeline.
type controllerSetup struct {
	*kinds.Actuator
	Executor executor.Executor
	Pipeline executor.Config
	// Kinds serves, besides the Infrastructure, the kinds the providers serve from templates.
	Kinds bool
	// served are the kinds the controller serves, once started.
	served []string
	// moreTypes are spec.type values served besides the tests' own.
	moreTypes []string
}

// actuatorOption changes the setup of a controller under test.
type actuatorOption func(*controllerSetup)

func startControllerWith(t testing.TB, namespace, workDir string, config *rest.Config, concurrency int, opts ...actuatorOption) *controllerUnderTest {
	t.Helper()
	return startControllerLogging(t, namespace, workDir, config, concurrency, logr.Logger{}, opts...)
}

// startControllerLogging is startControllerWith logging to log; the zero logger is the
// tests' shared one.
func startControllerLogging(t testing.TB, namespace, workDir string, config *rest.Config, concurrency int, log logr.Logger, opts ...actuatorOption) *controllerUnderTest {
	t.Helper()
	return startControllerIn(t, []string{namespace}, workDir, config, concurrency, log, opts...)
}

// startControllerIn is startControllerLogging for the Infrastructures of several namespaces.
func startControllerIn(t testing.TB, namespaces []string, workDir string, config *rest.Config, concurrency int, log logr.Logger, opts ...actuatorOption) *controllerUnderTest {
	t.Helper()
	g := NewWithT(t)
	cached := map[string]cache.Config{}
	for _, ns := range namespaces {
		cached[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Logger:                 log,
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: cached, ByObject: kinds.CachedObjects()},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: kinds.UncachedObjects()}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	output := &testenv.SyncBuffer{}
	recorder := mgr.GetEventRecorder("terraseed-infrastructure")
	setup := newSetup(t, mgr.GetClient(), mgr.GetAPIReader(), workDir, recorder, output)
	setup.Metadata = mgr.GetCache()
	for _, opt := range opts {
		opt(setup)
	}
	runs := executor.NewPipeline(setup.Executor, setup.Pipeline, kinds.RunHooks(recorder))
	runs.Log = mgr.GetLogger()
	g.Expect(mgr.Add(runs)).To(Succeed())
	setup.Runs = runs
	types := append([]string{"local", "slow", "slowlocal", "guarded", "zonal", "throttling", "stepped", "generating"}, setup.moreTypes...)
	reconciler := kinds.NewInfrastructureReconciler(setup.Actuator, types, nil)
	ctx, cancel := context.WithCancel(context.Background())
	options := controller.Options{SkipNameValidation: ptr(true), MaxConcurrentReconciles: concurrency}
	g.Expect(kinds.SetupInfrastructure(ctx, mgr, reconciler, runs.Ends(run.PurposeInfra, false), options)).To(Succeed())
	if setup.Kinds {
		setup.served, err = kinds.Setup(ctx, mgr, setup.Actuator, templates.Kinds, types, nil, runs.Ends, options)
		g.Expect(err).NotTo(HaveOccurred())
	}
	c := &controllerUnderTest{cancel: cancel, done: make(chan error, 1), output: output, cached: mgr.GetCache(), served: setup.served}
	go func() { c.done <- mgr.Start(ctx) }()
	t.Cleanup(c.stop)
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue(), "the controller's caches sync")
	return c
}

// newSetup is the setup of the tests' Infrastructure controller, with the local executor.
func newSetup(t testing.TB, c client.Client, reader client.Reader, workDir string, recorder events.EventRecorder, output io.Writer) *controllerSetup {
	t.Helper()
	// testdata/providers adds providers made for tests, as an operator would add theirs.
	registry, err := templates.NewRegistry("testdata/providers")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return &controllerSetup{
		Actuator: &kinds.Actuator{
			Client:    c,
			APIReader: reader,
			Recorder:  recorder,
			Providers: registry,
		},
		Executor: &executor.LocalExecutor{
			Client: c,
			Settings: terraformer.Settings{
				Terraform:   testenv.Terraform(t),
				Plugins:     terraformer.Plugins{Mirror: testenv.ProviderMirror(t)},
				StopTimeout: time.Minute,
			},
			BaseDir: workDir,
			Output:  output,
		},
	}
}

// stop stops the manager and waits for it, and for the runs it started, to end.
func (c *controllerUnderTest) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel = nil
}

// shoot is one test's shoot: a namespace with the kubeconfig secret, and an Infrastructure.
type shoot struct {
	namespace string
	infra     *extensionsv1alpha1.Infrastructure
}

func newShoot(t *testing.T, zones ...string) *shoot {
	t.Helper()
	return newShootIn(env.Namespace(t), "infrastructure", zones...)
}

func newShootIn(ns, name string, zones ...string) *shoot {
	return &shoot{namespace: ns, infra: &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec:  extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: testenv.LocalProviderConfig(zones...)},
			Region:       "local-1",
			SecretRef:    corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
			SSHPublicKey: []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3Q terraseed@test"),
		},
	}}
}

func (s *shoot) createSecret(t *testing.T, kubeconfig []byte) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "cloudprovider"},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
}

func (s *shoot) key() client.ObjectKey { return client.ObjectKeyFromObject(s.infra) }

// ref names the shoot's Infrastructure to the state commands.
func (s *shoot) ref() kinds.StateRef { return kinds.StateRef{Key: s.key()} }

// targetNamespace is where the local provider creates the shoot's objects.
func (s *shoot) targetNamespace() string { return s.namespace + "--" + s.infra.Name }

func (s *shoot) get(g Gomega) *extensionsv1alpha1.Infrastructure {
	infra := &extensionsv1alpha1.Infrastructure{}
	g.Expect(env.Client.Get(context.Background(), s.key(), infra)).To(Succeed())
	return infra
}

// waitFor waits until the last operation of the given type reached the given state.
func (s *shoot) waitFor(t *testing.T, opType extensionsv1alpha1.LastOperationType, state extensionsv1alpha1.LastOperationState) *extensionsv1alpha1.Infrastructure {
	t.Helper()
	var infra *extensionsv1alpha1.Infrastructure
	NewWithT(t).Eventually(func(g Gomega) {
		infra = s.get(g)
		g.Expect(infra.Status.LastOperation).NotTo(BeNil())
		g.Expect(infra.Status.LastOperation.Type).To(Equal(opType), "last operation: %+v", infra.Status.LastOperation)
		g.Expect(infra.Status.LastOperation.State).To(Equal(state), "last operation: %+v, last error: %+v", infra.Status.LastOperation, infra.Status.LastError)
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	return infra
}

// waitHandled waits, as Gardener does before it goes on, until the operation asked for by
// annotation succeeded and the annotation is gone: the status is written first.
func (s *shoot) waitHandled(t *testing.T, opType extensionsv1alpha1.LastOperationType) *extensionsv1alpha1.Infrastructure {
	t.Helper()
	infra := s.waitFor(t, opType, extensionsv1alpha1.LastOperationStateSucceeded)
	NewWithT(t).Eventually(func(g Gomega) {
		infra = s.get(g)
		g.Expect(infra.Annotations).NotTo(HaveKey(extension.AnnotationOperation))
	}).WithTimeout(time.Minute).Should(Succeed())
	return infra
}

// reconciled asks for a reconcile as Gardener does and waits for it to succeed, reading
// the Infrastructure's versions in order from a watch: the request is taken before the
// reconcile is marked Processing, so the success the Infrastructure showed when asked may
// still be there once the annotation is gone; only a success after Processing is this
// reconcile's.
func (s *shoot) reconciled(tb testing.TB) *extensionsv1alpha1.Infrastructure {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	current := &extensionsv1alpha1.Infrastructure{}
	if err := env.Client.Get(ctx, s.key(), current); err != nil {
		tb.Fatal(err)
	}
	w, err := watching.Watch(ctx, &extensionsv1alpha1.InfrastructureList{}, client.InNamespace(s.namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: current.ResourceVersion, FieldSelector: "metadata.name=" + s.infra.Name}})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Stop()
	annotate(NewWithT(tb), s, extension.OperationReconcile)
	processing := false
	for e := range w.ResultChan() {
		infra, ok := e.Object.(*extensionsv1alpha1.Infrastructure)
		if !ok {
			tb.Fatalf("watching %s: %v", s.key(), e.Object)
		}
		current = infra
		last := infra.Status.LastOperation
		if last == nil || last.Type != extensionsv1alpha1.LastOperationTypeReconcile {
			continue
		}
		processing = processing || last.State == extensionsv1alpha1.LastOperationStateProcessing
		if _, asked := infra.Annotations[extension.AnnotationOperation]; processing && !asked && last.State == extensionsv1alpha1.LastOperationStateSucceeded {
			return infra
		}
	}
	tb.Fatalf("the reconcile of %s did not succeed: last operation %+v, last error %+v", s.key(), current.Status.LastOperation, current.Status.LastError)
	return nil
}

// createdShoot is a shoot whose Infrastructure a running controller has created.
func createdShoot(t *testing.T, zones ...string) *shoot {
	t.Helper()
	s := newShoot(t, zones...)
	s.createSecret(t, adminKubeconfig(t))
	startController(t, s.namespace, workDir(t))
	NewWithT(t).Expect(env.Client.Create(context.Background(), s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	return s
}

// waitGone waits until the Infrastructure no longer exists.
func (s *shoot) waitGone(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), s.key(), &extensionsv1alpha1.Infrastructure{}))
	}).WithTimeout(3 * time.Minute).Should(BeTrue())
}

func adminKubeconfig(t testing.TB) []byte {
	t.Helper()
	if kubeconfig == nil {
		var err error
		kubeconfig, err = env.AdminKubeconfig()
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	return kubeconfig
}

func workDir(t *testing.T) string { return filepath.Join(t.TempDir(), "runs") }

func ptr[T any](v T) *T { return &v }

func keyOf(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}
