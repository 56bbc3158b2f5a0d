package controlplane_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/controlplane"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/test/testenv"
)

var env *testenv.Environment

// healthPeriod is short so that the tests see the condition refreshed.
const healthPeriod = 2 * time.Second

func TestMain(m *testing.M) {
	endLog := testenv.LogControllersToFile()
	code := testenv.Run(m, &env, func(e *testenv.Environment) (func() error, error) {
		// Deployments get ReplicaSets, and ReplicaSets pods, as in a seed; the garbage
		// collector removes what a deleted Deployment owned.
		cm, err := e.StartControllerManager("deployment-controller", "replicaset-controller", "garbage-collector-controller")
		if err != nil {
			return nil, err
		}
		return cm.Stop, nil
	})
	endLog(code != 0)
	os.Exit(code)
}

// startController runs the ControlPlane controller and its health check for one namespace.
func startController(t *testing.T, namespace string, opts ...func(*controlplane.Actuator)) {
	t.Helper()
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	registry, err := templates.NewRegistry("testdata/providers")
	g.Expect(err).NotTo(HaveOccurred())
	live, err := client.New(env.Config, client.Options{Scheme: env.Scheme, Mapper: mgr.GetRESTMapper()})
	g.Expect(err).NotTo(HaveOccurred())
	actuator := &controlplane.Actuator{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("terraseed-controlplane"),
		Providers: registry,
		Resources: controlplane.NewResourceManager(live),
	}
	for _, opt := range opts {
		opt(actuator)
	}
	reconciler := controlplane.NewReconciler(actuator, []string{"local", "pruning"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	skip := true
	g.Expect(controlplane.SetupWithManager(ctx, mgr, reconciler, actuator, controller.Options{SkipNameValidation: &skip, MaxConcurrentReconciles: 2}, healthPeriod)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
}

// newControlPlane is a ControlPlane in a namespace of its own, with its credentials secret.
func newControlPlane(t *testing.T, cpType, config string) *extensionsv1alpha1.ControlPlane {
	t.Helper()
	ns := env.Namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: ns}, Data: map[string][]byte{"kubeconfig": []byte("not read by the controller")}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
	return &extensionsv1alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "control-plane", Namespace: ns},
		Spec: extensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: cpType, ProviderConfig: &runtime.RawExtension{Raw: []byte(config)}},
			Region:      "local-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
			InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"InfrastructureStatus","namespace":"` + ns + `--infrastructure","zones":[{"name":"zone-a","workers":"10.250.0.0/19"}]}`)},
		},
	}
}
