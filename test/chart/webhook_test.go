package chart

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/terraseed/terraseed/controller/webhook"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/test/testenv"
)

// The control-plane webhook, run as the chart's ServiceAccount with the flags the chart
// passes, fills the chart's certificate Secret and webhook configuration: the chart's RBAC
// is enough for it.
func TestWebhookRunsWithTheChartsRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	// Cluster-scoped objects get another release name, apart from the other tests'.
	objects := render(t, release, "--include-crds")
	for _, o := range objects {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "MutatingWebhookConfiguration" {
			o.SetName("webhook-" + o.GetName())
			if o.GetKind() == "ClusterRoleBinding" {
				o.Object["roleRef"].(map[string]any)["name"] = o.GetName()
			}
			if o.GetKind() == "ClusterRole" {
				for _, rule := range o.Object["rules"].([]any) {
					names, _ := rule.(map[string]any)["resourceNames"].([]any)
					for i, name := range names {
						if name == "terraseed-controlplane" {
							names[i] = "webhook-terraseed-controlplane"
						}
					}
				}
			}
		}
		g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "webhook-terraseed-controlplane"}})
	})
	_, c := controllerContainer(t, objects)
	g.Expect(c.Args).To(ContainElement("--webhook-configuration=terraseed-controlplane"))

	stop := runWebhookAs(t, release)

	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: release, Name: "terraseed-webhook-cert"}, secret)).To(Succeed())
	g.Expect(secret.Data).To(HaveKey("ca.crt"))
	g.Expect(secret.Data).To(HaveKey("tls.crt"))
	config := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "webhook-terraseed-controlplane"}, config)).To(Succeed())
	g.Expect(config.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), "the release's metadata is kept")
	var names []string
	for _, hook := range config.Webhooks {
		names = append(names, hook.Name)
		g.Expect(hook.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
		g.Expect(hook.ClientConfig.Service.Namespace).To(Equal(release))
		g.Expect(hook.ClientConfig.Service.Name).To(Equal("terraseed-webhook"))
		g.Expect(*hook.ClientConfig.Service.Port).To(Equal(int32(443)))
	}
	g.Expect(names).To(ConsistOf("aws.controlplane.terraseed.io", "local.controlplane.terraseed.io"))

	// Deleted by hand, the configuration is not re-created by a restarted controller,
	// which may not create one: the chart owns it.
	stop()
	g.Expect(env.Client.Delete(ctx, config)).To(Succeed())
	runWebhookAs(t, release)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: config.Name}, config))).To(BeTrue())
}

// runWebhookAs runs the control-plane webhook as the chart's ServiceAccount until the
// test ends or the returned function is called.
func runWebhookAs(t *testing.T, release string) (stop func()) {
	t.Helper()
	g := NewWithT(t)
	registry, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	w, err := webhook.New(webhook.Options{
		Port: testenv.FreePort(t), CertDir: t.TempDir(), Namespace: release, ServiceName: "terraseed-webhook",
		SecretName: "terraseed-webhook-cert", ConfigurationName: "webhook-terraseed-controlplane",
	})
	g.Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(serviceAccountConfig(release, "terraseed"), ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", WebhookServer: w.Server(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	g.Expect(w.SetupWithManager(ctx, mgr, registry, registry.Types())).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			g.Expect(<-done).To(Succeed())
		}
	}
	t.Cleanup(stop)
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("the manager stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the webhook's certificate was not ready within a minute")
	}
	return stop
}
