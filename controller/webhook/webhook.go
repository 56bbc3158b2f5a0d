package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/terraseed/terraseed/controller/serving"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/mutations"
)

// Labels Gardener sets (github.com/gardener/gardener, pkg/apis/core/v1beta1/constants):
// on shoot namespaces the shoot's provider type, on control-plane Deployments app and role.
const (
	LabelShootProvider = "shoot.gardener.cloud/provider"
	labelApp           = "app"
	labelRole          = "role"
	appKubernetes      = "kubernetes"
)

const (
	// failurePolicy: a Deployment the webhook cannot mutate is refused, not stored as
	// Gardener wrote it. An unmutated kube-apiserver or kube-controller-manager runs without
	// the provider's cloud configuration (a control plane that looks healthy but is not);
	// refused, gardenlet retries the write and reports the error until the webhook is back.
	// The selectors confine this to the served types' shoot namespaces and to the
	// Deployments the provider mutates. docs/operating.md, "Control-plane webhook".
	failurePolicy = admissionregistrationv1.Fail
	// TimeoutSeconds is Gardener's for its extensions' webhooks and the API server's
	// default. A mutation is computed in memory from the Cluster, read from the API server,
	// in about a millisecond (BenchmarkAdmission); waiting longer than this means the
	// webhook is unreachable.
	TimeoutSeconds int32 = 10

	// PathPrefix is followed by the provider type: one handler per type.
	PathPrefix = "/controlplane/"
	caName     = "terraseed-webhook-ca"
	fieldOwner = "terraseed"
)

// Options configure the webhook.
type Options struct {
	// Port and Host the server listens on (Host "" is every address).
	Port int
	Host string
	// CertDir receives the serving certificate and key (tls.crt, tls.key) from the Secret.
	CertDir string
	// Namespace holds the certificate Secret and, with ServiceName, the Service.
	Namespace  string
	SecretName string
	// ConfigurationName is the MutatingWebhookConfiguration's name.
	ConfigurationName string
	// ServiceName (port ServicePort) is how the API server reaches the webhook in a
	// cluster; URL (https://<DNS name>:<port>) replaces it where there is no Service.
	ServiceName string
	ServicePort int32
	URL         string
	// Certificate lifetimes and rotation; zero keeps cert-controller's defaults (CA 10
	// years, serving certificate 1 year, renewed 90 days before it expires, checked every
	// 12 hours).
	CAValidity, CertValidity, RotationLookahead, RotationCheckInterval time.Duration
}

// Webhook is the control-plane webhook: its server, its handlers, its configuration and
// its certificates.
type Webhook struct {
	opts      Options
	providers *templates.Registry
	types     []string
	dnsName   string
	certs     *certificates
	server    webhook.Server
	ready     chan struct{}
}

// New checks the options and builds the webhook's server, which the manager needs before
// the webhook is set up with it.
func New(o Options) (*Webhook, error) {
	switch {
	case o.Namespace == "":
		return nil, errors.New("the namespace of the certificate Secret is required")
	case o.SecretName == "" || o.ConfigurationName == "":
		return nil, errors.New("the certificate Secret's and the webhook configuration's names are required")
	case o.CertDir == "":
		return nil, errors.New("the certificate directory is required")
	case (o.URL == "") == (o.ServiceName == ""):
		return nil, errors.New("set exactly one of a Service and a URL for the API server to call")
	}
	w := &Webhook{opts: o, ready: make(chan struct{})}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil {
			return nil, fmt.Errorf("webhook URL: %w", err)
		}
		if u.Scheme != "https" || u.Hostname() == "" || net.ParseIP(u.Hostname()) != nil || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("webhook URL %q: must be https://<DNS name>[:port] (the certificate names DNS names only)", o.URL)
		}
		w.dnsName = u.Hostname()
	} else {
		if o.ServicePort == 0 {
			w.opts.ServicePort = 443
		}
		w.dnsName = fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace)
	}
	w.certs = &certificates{key: types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}, dir: o.CertDir}
	w.server = webhook.NewServer(webhook.Options{
		Host: o.Host,
		Port: o.Port,
		// Serving straight from the Secret: a rotated certificate is used as soon as the
		// Secret changes, without waiting for a mounted volume to follow.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = w.certs.GetCertificate }, serving.HardenTLS},
	})
	return w, nil
}

// Types lists the provider types the webhook mutates for.
func (w *Webhook) Types() []string { return w.types }

// Server is the webhook server, for the manager's options; nil for a nil Webhook, so that
// the manager builds its default one.
func (w *Webhook) Server() webhook.Server {
	if w == nil {
		return nil
	}
	return w.server
}

// Ready is closed once the serving certificate exists and its CA is in the configuration.
func (w *Webhook) Ready() <-chan struct{} { return w.ready }

// SetupWithManager registers a handler per served type whose provider has mutations, and
// the webhook configuration, and adds the certificate rotation; without such types it
// serves nothing and removes the configuration. The manager must have been built with
// Server().
func (w *Webhook) SetupWithManager(ctx context.Context, mgr manager.Manager, registry *templates.Registry, types []string) error {
	log := ctrl.LoggerFrom(ctx)
	c := mgr.GetClient()
	if err := w.selectTypes(registry, types); err != nil {
		return err
	}
	if len(w.types) == 0 {
		log.Info("noControlPlaneMutations", "configuration", w.opts.ConfigurationName)
		err := c.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: w.opts.ConfigurationName}})
		return client.IgnoreNotFound(err)
	}
	if mgr.GetWebhookServer() != w.server {
		return errors.New("the manager's webhook server is not the control-plane webhook's")
	}
	for _, t := range w.types {
		p, err := registry.Provider(t)
		if err != nil {
			return err
		}
		// The Cluster is read live: Gardener writes it right before the Deployments, and a
		// cache a moment behind would refuse them or mutate for the shoot's old version.
		w.server.Register(PathPrefix+t, &admission.Webhook{Handler: &handler{provider: p, reader: mgr.GetAPIReader()}, RecoverPanic: ptr.To(true)})
	}
	// cert-controller fills the Secret but does not create it.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.opts.Namespace, Name: w.opts.SecretName}}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook certificate Secret: %w", err)
	}
	// The other replica, and the rotator injecting the CA, write the configuration too.
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error { return w.register(ctx, c, mgr.GetAPIReader()) }); err != nil {
		return fmt.Errorf("registering the webhook configuration: %w", err)
	}
	if err := w.addCertificates(mgr); err != nil {
		return err
	}
	log.Info("servingControlPlaneWebhook", "types", w.types, "configuration", w.opts.ConfigurationName, "dnsName", w.dnsName)
	return nil
}

// selectTypes keeps the served types whose provider has mutations.
func (w *Webhook) selectTypes(registry *templates.Registry, types []string) error {
	w.providers, w.types = registry, nil
	for _, t := range types {
		p, err := registry.Provider(t)
		if err != nil {
			return err
		}
		if p.Mutations() != nil {
			w.types = append(w.types, t)
		}
	}
	slices.Sort(w.types)
	return nil
}

// addCertificates adds the certificate rotation, the serving certificate's reload and
// the readiness check that waits for a certificate.
func (w *Webhook) addCertificates(mgr manager.Manager) error {
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      w.certs.key,
		CertDir:        w.opts.CertDir,
		CAName:         caName,
		CAOrganization: "terraseed",
		DNSName:        w.dnsName,
		IsReady:        w.ready,
		Webhooks:       []rotator.WebhookInfo{{Name: w.opts.ConfigurationName, Type: rotator.Mutating}},
		FieldOwner:     fieldOwner,
		// Every replica serves admissions, so every replica keeps the certificate valid;
		// they write the same Secret with optimistic locking.
		RequireLeaderElection:  false,
		CaCertDuration:         w.opts.CAValidity,
		ServerCertDuration:     w.opts.CertValidity,
		LookaheadInterval:      w.opts.RotationLookahead,
		RotationCheckFrequency: w.opts.RotationCheckInterval,
		ControllerName:         rotatorName(w.opts.ConfigurationName),
	}); err != nil {
		return err
	}
	w.certs.mgr = mgr
	if err := mgr.Add(w.certs); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("controlplane-webhook", func(*http.Request) error {
		select {
		case <-w.ready:
			return w.server.StartedChecker()(nil)
		default:
			return errors.New("the webhook's certificate is not ready")
		}
	})
}

// rotators counts the certificate rotations set up in this process: controller-runtime
// refuses a controller name twice in a process, and a manager started again in the same
// process (tests, an embedded restart) needs a new one.
var rotators atomic.Int64

func rotatorName(configuration string) string {
	name := "controlplane-webhook-certificates-" + configuration
	if n := rotators.Add(1); n > 1 {
		name += "-" + strconv.FormatInt(n, 10)
	}
	return name
}

// Configuration is the MutatingWebhookConfiguration the webhook registers, without the
// CA bundle, which the certificate rotation writes. The chart's policy
// <release>-controller-webhook admits exactly these webhooks from the controller's
// ServiceAccount: a change here is a change there.
func (w *Webhook) Configuration() *admissionregistrationv1.MutatingWebhookConfiguration {
	config := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: w.opts.ConfigurationName, Labels: map[string]string{"app.kubernetes.io/managed-by": "terraseed"}},
	}
	for _, t := range w.types {
		p, _ := w.providers.Provider(t)
		var roles []string
		for _, name := range p.Mutations().DeploymentNames() {
			roles = append(roles, mutations.ControlPlaneDeployments[name])
		}
		clientConfig := admissionregistrationv1.WebhookClientConfig{}
		if w.opts.URL != "" {
			u, _ := url.JoinPath(w.opts.URL, PathPrefix+t)
			clientConfig.URL = &u
		} else {
			clientConfig.Service = &admissionregistrationv1.ServiceReference{
				Namespace: w.opts.Namespace, Name: w.opts.ServiceName, Path: ptr.To(PathPrefix + t), Port: ptr.To(w.opts.ServicePort),
			}
		}
		config.Webhooks = append(config.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name:         t + ".controlplane.terraseed.io",
			ClientConfig: clientConfig,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			FailurePolicy: ptr.To(failurePolicy),
			MatchPolicy:   ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: LabelShootProvider, Operator: metav1.LabelSelectorOpIn, Values: []string{t}},
			}},
			ObjectSelector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{labelApp: appKubernetes},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: labelRole, Operator: metav1.LabelSelectorOpIn, Values: roles}},
			},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			// The mutation is idempotent and other webhooks do not undo it.
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		})
	}
	return config
}

// register creates the configuration or patches it to the wanted one, keeping the CA
// bundle the rotation wrote into each webhook.
func (w *Webhook) register(ctx context.Context, c client.Client, reader client.Reader) error {
	want := w.Configuration()
	current := &admissionregistrationv1.MutatingWebhookConfiguration{}
	err := reader.Get(ctx, client.ObjectKeyFromObject(want), current)
	if apierrors.IsNotFound(err) {
		err := c.Create(ctx, want, client.FieldOwner(fieldOwner))
		if apierrors.IsForbidden(err) {
			// In a cluster the chart owns the configuration, so that it goes with the
			// release; deleted by hand (an emergency), it stays deleted until the chart
			// brings it back, and the webhook serves without being called.
			ctrl.LoggerFrom(ctx).Info("webhookConfigurationMissing", "configuration", want.Name, "hint", "helm upgrade restores it")
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	var caBundle []byte
	for _, hook := range current.Webhooks {
		if len(hook.ClientConfig.CABundle) > 0 {
			caBundle = hook.ClientConfig.CABundle
		}
	}
	// Only the webhooks: the object's metadata may be a Helm release's.
	patched := current.DeepCopy()
	patched.Webhooks = want.Webhooks
	for i := range patched.Webhooks {
		patched.Webhooks[i].ClientConfig.CABundle = caBundle
	}
	return c.Patch(ctx, patched, client.MergeFromWithOptions(current, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fieldOwner))
}
