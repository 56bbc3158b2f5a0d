package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/controller/webhook"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/test/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	// The webhook's log goes to a file, shown when a test fails.
	logFile, err := os.CreateTemp("", "terraseed-webhook-log-")
	if err != nil {
		panic(err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.UseDevMode(true)))
	code := testenv.Run(m, &env)
	_ = logFile.Close()
	if code != 0 {
		if f, err := os.Open(logFile.Name()); err == nil {
			if info, err := f.Stat(); err == nil && info.Size() > 64<<10 {
				_, _ = f.Seek(-64<<10, io.SeekEnd)
			}
			fmt.Fprintln(os.Stderr, "---- the end of the webhook's log:")
			_, _ = io.Copy(os.Stderr, f)
			_ = f.Close()
		}
	}
	_ = os.Remove(logFile.Name())
	os.Exit(code)
}

// webhookUnderTest is a manager serving the control-plane webhook on this machine, which
// envtest's kube-apiserver calls through the configuration the webhook registers.
type webhookUnderTest struct {
	*webhook.Webhook
	options   webhook.Options
	providers *templates.Registry
	port      int
	// probe is an aws shoot namespace where start checks that the API server calls it.
	probe  string
	cancel context.CancelFunc
	done   chan error
}

// startWebhook serves the webhook for every provider type, with the providers embedded
// and those in dirs. The configuration is deleted when the test ends: it is
// cluster-scoped, and a configuration whose server is gone refuses Deployments.
func startWebhook(t testing.TB, dirs ...string) *webhookUnderTest {
	t.Helper()
	return startWebhookWith(t, func(*webhook.Options) {}, dirs...)
}

// startWebhookWith is startWebhook with options changed by configure.
func startWebhookWith(t testing.TB, configure func(*webhook.Options), dirs ...string) *webhookUnderTest {
	t.Helper()
	g := NewWithT(t)
	registry, err := templates.NewRegistry(dirs...)
	g.Expect(err).NotTo(HaveOccurred())
	release := env.Namespace(t)
	port := testenv.FreePort(t)
	w := &webhookUnderTest{port: port, providers: registry, options: webhook.Options{
		Port:              port,
		CertDir:           t.TempDir(),
		Namespace:         release,
		SecretName:        "terraseed-webhook-cert",
		ConfigurationName: "terraseed-" + release,
		URL:               "https://localhost:" + strconv.Itoa(port),
	}}
	configure(&w.options)
	t.Cleanup(func() {
		w.stop(t)
		_ = env.Client.Delete(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: w.options.ConfigurationName}})
	})
	w.start(t)
	return w
}

// start runs a new webhook and manager, as a restarted controller would.
func (w *webhookUnderTest) start(t testing.TB) {
	t.Helper()
	g := NewWithT(t)
	var err error
	w.Webhook, err = webhook.New(w.options)
	g.Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          w.Server(),
		// cert-controller's rotator finishes a refresh it began before it sees the stop,
		// retrying on conflicts with backoff; a test rotating every second on a loaded
		// machine can hold it there beyond the default 30 s.
		GracefulShutdownTimeout: ptr.To(2 * time.Minute),
	})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), ctrl.Log.WithName(t.Name())))
	g.Expect(w.SetupWithManager(ctx, mgr, w.providers, w.providers.Types())).To(Succeed())
	w.cancel, w.done = cancel, make(chan error, 1)
	go func() { w.done <- mgr.Start(ctx) }()
	select {
	case <-w.Ready():
	case err := <-w.done:
		// Gone already: the cleanup has nothing to stop, and must not wait for it.
		cancel()
		w.cancel = nil
		t.Fatalf("the manager stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the webhook's certificate was not ready within a minute")
	}
	// Ready means the CA is in the configuration; the API server picks it up through its
	// own watch, a moment later.
	if w.probe == "" {
		w.probe = awsShootNamespace(t, seedEra)
	}
	probe := readDeployment(t, "seed-001-kube-controller-manager.yaml")
	probe.Namespace = w.probe
	g.Eventually(func(g Gomega) {
		d := probe.DeepCopy()
		g.Expect(env.Client.Create(context.Background(), d, client.DryRunAll)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--cloud-provider=external"))
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func (w *webhookUnderTest) stop(t testing.TB) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	if err := <-w.done; err != nil {
		t.Errorf("the manager ended with: %v", err)
	}
	w.cancel = nil
}

func (w *webhookUnderTest) configuration(g Gomega) *admissionregistrationv1.MutatingWebhookConfiguration {
	config := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: w.options.ConfigurationName}, config)).To(Succeed())
	return config
}

func (w *webhookUnderTest) secret(g Gomega) *corev1.Secret {
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: w.options.Namespace, Name: w.options.SecretName}, secret)).To(Succeed())
	return secret
}

// servedBy connects to the webhook trusting only caPEM, as the API server does with the
// configuration's caBundle.
func (w *webhookUnderTest) servedBy(caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("no certificate in the CA bundle")
	}
	conn, err := tls.Dial("tcp", net.JoinHostPort("localhost", strconv.Itoa(w.port)), &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		return err
	}
	return conn.Close()
}

// shootNamespace creates a namespace labelled as Gardener labels a shoot namespace of
// the provider type; "" leaves it unlabelled.
func shootNamespace(t testing.TB, providerType string) string {
	t.Helper()
	if providerType == "" {
		return env.Namespace(t)
	}
	return env.LabelledNamespace(t, map[string]string{webhook.LabelShootProvider: providerType})
}

// seedEra is the Kubernetes version of the seeds' Deployments (their hyperkube image):
// the aws provider mutates it as the seeds show.
const seedEra = "1.16.4"

// awsShootNamespace is an aws shoot namespace with its Cluster, whose shoot has the
// Kubernetes version.
func awsShootNamespace(t testing.TB, version string) string {
	t.Helper()
	ns := shootNamespace(t, "aws")
	createCluster(t, ns, `{"spec": {"kubernetes": {"version": "`+version+`"}}}`)
	return ns
}

// readDeployment reads a Deployment from testdata.
func readDeployment(t testing.TB, name string) *appsv1.Deployment {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(data, d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// create stores a copy of the Deployment in the namespace and returns it as stored.
func create(ctx context.Context, namespace string, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	d = d.DeepCopy()
	d.Namespace = namespace
	if err := env.Client.Create(ctx, d); err != nil {
		return nil, err
	}
	return d, nil
}
