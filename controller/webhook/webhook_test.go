package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/webhook"
)

// The seeds' kube-controller-manager and kube-apiserver, written by "Gardener" into an
// aws shoot namespace of the seeds' Kubernetes version, are stored exactly as the seeds
// show them mutated: the API server
// called the webhook over TLS, trusting the CA the controller's rotation wrote.
func TestSeedDeploymentsAreStoredMutated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startWebhook(t)

	config := w.configuration(g)
	secret := w.secret(g)
	g.Expect(secret.Data).To(HaveKey("ca.crt"))
	g.Expect(config.Webhooks).NotTo(BeEmpty())
	for _, hook := range config.Webhooks {
		g.Expect(hook.ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]), hook.Name)
		g.Expect(*hook.FailurePolicy).To(Equal(admissionregistrationv1.Fail))
		g.Expect(*hook.TimeoutSeconds).To(Equal(webhook.TimeoutSeconds))
	}

	aws, unlabelled := awsShootNamespace(t, seedEra), shootNamespace(t, "")
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: aws, Name: "cloud-provider-config"},
		Data:       map[string]string{"cloudprovider.conf": "[Global]\nZone=eu-west-1a\n"},
	})).To(Succeed())

	for _, seed := range []string{"seed-001-kube-controller-manager", "seed-002-kube-apiserver"} {
		t.Run(seed, func(t *testing.T) {
			g := NewWithT(t)
			before, after := readDeployment(t, seed+".yaml"), readDeployment(t, seed+"-mutated.yaml")

			mutated, err := create(ctx, aws, before)
			g.Expect(err).NotTo(HaveOccurred())
			// What the seed shows, stored where no webhook applies: defaults and all.
			want, err := create(ctx, unlabelled, after)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mutated.Spec.Template.Spec).To(Equal(want.Spec.Template.Spec))
			g.Expect(mutated.Spec.Template.Spec.Containers[0].Command).To(Equal(after.Spec.Template.Spec.Containers[0].Command))

			// Gardener writes its Deployment again: stored as it was, not a new generation.
			again := mutated.DeepCopy()
			again.Spec = before.Spec
			g.Expect(env.Client.Update(ctx, again)).To(Succeed())
			g.Expect(again.Spec.Template.Spec).To(Equal(mutated.Spec.Template.Spec))
			g.Expect(again.Generation).To(Equal(mutated.Generation))

			// The same Deployment in an unlabelled namespace is left as it was written.
			untouched, err := create(ctx, shootNamespace(t, ""), before)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(untouched.Spec.Template.Spec.Containers[0].Command).To(Equal(before.Spec.Template.Spec.Containers[0].Command))
			g.Expect(untouched.Spec.Template.Spec.Volumes).To(BeEmpty())
		})
	}

	t.Run("other providers and Deployments are untouched", func(t *testing.T) {
		g := NewWithT(t)
		kcm := readDeployment(t, "seed-001-kube-controller-manager.yaml")
		command := kcm.Spec.Template.Spec.Containers[0].Command

		// A type no provider serves.
		stored, err := create(ctx, shootNamespace(t, "azure"), kcm)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stored.Spec.Template.Spec.Containers[0].Command).To(Equal(command))

		// A Deployment of the aws namespace that is not the control plane's, with and
		// without Gardener's labels.
		etcd := kcm.DeepCopy()
		etcd.Name = "etcd-main"
		stored, err = create(ctx, aws, etcd)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stored.Spec.Template.Spec.Containers[0].Command).To(Equal(command))
		scheduler := kcm.DeepCopy()
		scheduler.Name = "kube-scheduler"
		stored, err = create(ctx, aws, scheduler)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stored.Spec.Template.Spec.Containers[0].Command).To(Equal(command))

		// The local provider mutates with its own data, templated from the Cluster.
		local := shootNamespace(t, "local")
		createCluster(t, local, "{}")
		stored, err = create(ctx, local, kcm)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stored.Spec.Template.Spec.Containers[0].Command).To(ContainElements("--cloud-provider=external", "--cluster-name="+local))
		g.Expect(stored.Spec.Template.Spec.Containers[0].Command).NotTo(ContainElement("--cluster-name=shoot--core--aws-01"))
		g.Expect(stored.Spec.Template.Spec.Volumes).To(BeEmpty())
	})
}

// The CA and serving certificate are replaced (here: the Secret is emptied, as when it is
// lost); the new CA reaches the configuration and the server, and admissions go on.
func TestCertificateRotationKeepsAdmitting(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startWebhook(t)
	oldCA := w.secret(g).Data["ca.crt"]
	g.Expect(w.servedBy(oldCA)).To(Succeed())

	secret := w.secret(g)
	secret.Data = nil
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())

	var newCA []byte
	g.Eventually(func(g Gomega) {
		newCA = w.secret(g).Data["ca.crt"]
		g.Expect(newCA).NotTo(BeEmpty())
		g.Expect(newCA).NotTo(Equal(oldCA))
		for _, hook := range w.configuration(g).Webhooks {
			g.Expect(hook.ClientConfig.CABundle).To(Equal(newCA))
		}
		g.Expect(w.servedBy(newCA)).To(Succeed())
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(w.servedBy(oldCA)).NotTo(Succeed(), "the server still presents a certificate of the old CA")

	// The API server follows the configuration's new caBundle through its own watch.
	aws := awsShootNamespace(t, seedEra)
	// Dry runs, so that an attempt the client gave up on cannot make the next one collide.
	kcm := readDeployment(t, "seed-001-kube-controller-manager.yaml")
	kcm.Namespace = aws
	g.Eventually(func(g Gomega) {
		d := kcm.DeepCopy()
		g.Expect(env.Client.Create(ctx, d, client.DryRunAll)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--cloud-provider=external"))
	}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	// A restarted controller keeps the valid certificate instead of making another.
	w.stop(t)
	w.start(t)
	g.Expect(w.secret(g).Data["ca.crt"]).To(Equal(newCA))
	g.Expect(w.servedBy(newCA)).To(Succeed())
}

// The serving certificate is always within its renewal window, so it is renewed on every
// check and every change of the Secret, under the same CA: not one admission fails
// meanwhile.
func TestServingCertificateRenewalDropsNoAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startWebhookWith(t, func(o *webhook.Options) {
		o.CertValidity, o.RotationLookahead, o.RotationCheckInterval = time.Hour, 2*time.Hour, time.Second
	})
	ca := w.secret(g).Data["ca.crt"]
	aws := awsShootNamespace(t, seedEra)
	kcm := readDeployment(t, "seed-001-kube-controller-manager.yaml")
	certificates := map[string]bool{}
	admissions := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) || len(certificates) < 3; admissions++ {
		g.Expect(admissions).To(BeNumerically("<", 2000), "the serving certificate was not renewed")
		certificates[string(w.secret(g).Data["tls.crt"])] = true
		d := kcm.DeepCopy()
		d.Namespace = aws
		g.Expect(env.Client.Create(ctx, d, client.DryRunAll)).To(Succeed(), "admission %d", admissions)
		g.Expect(d.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--cloud-provider=external"))
	}
	g.Expect(w.secret(g).Data["ca.crt"]).To(Equal(ca))
	t.Logf("%d admissions across %d serving certificates", admissions, len(certificates))
}

// With the webhook down, its failure policy (Fail) holds: the control-plane Deployments
// of served shoot namespaces are refused rather than stored unmutated; everything else is
// admitted as before.
func TestWebhookDownRefusesOnlyWhatItMutates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startWebhook(t)
	aws := awsShootNamespace(t, seedEra)
	kcm := readDeployment(t, "seed-001-kube-controller-manager.yaml")
	w.stop(t)

	_, err := create(ctx, aws, kcm)
	g.Expect(err).To(MatchError(ContainSubstring("failed calling webhook")))
	g.Expect(err).To(MatchError(ContainSubstring("aws.controlplane.terraseed.io")))
	stored := &appsv1.Deployment{}
	g.Expect(client.IgnoreNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: aws, Name: kcm.Name}, stored))).To(Succeed())
	g.Expect(stored.Name).To(BeEmpty(), "stored unmutated")

	_, err = create(ctx, shootNamespace(t, ""), kcm)
	g.Expect(err).NotTo(HaveOccurred())
	other := kcm.DeepCopy()
	other.Name, other.Labels = "machine-controller-manager", map[string]string{"app": "machine-controller-manager"}
	other.Spec.Selector.MatchLabels, other.Spec.Template.Labels = other.Labels, other.Labels
	_, err = create(ctx, aws, other)
	g.Expect(err).NotTo(HaveOccurred())

	// Back up, the refused write goes through.
	w.start(t)
	created, err := create(ctx, aws, kcm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--external-cloud-volume-plugin=aws"))
}

// A provider from a directory declares its mutations with no Go change: the sandbox of
// docs/provider-authoring.md, whose values are templated from the Cluster.
func TestProviderDirectoryMutations(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	w := startWebhook(t, "../../docs/examples/provider-authoring/providers")
	g.Expect(w.Types()).To(ContainElements("sandbox", "aws", "local"))
	hooks := map[string]admissionregistrationv1.MutatingWebhook{}
	for _, hook := range w.configuration(g).Webhooks {
		hooks[hook.Name] = hook
	}
	sandbox := hooks["sandbox.controlplane.terraseed.io"]
	g.Expect(sandbox.NamespaceSelector.MatchExpressions).To(ConsistOf(metav1.LabelSelectorRequirement{
		Key: "shoot.gardener.cloud/provider", Operator: metav1.LabelSelectorOpIn, Values: []string{"sandbox"}}))
	g.Expect(sandbox.ObjectSelector.MatchLabels).To(Equal(map[string]string{"app": "kubernetes"}))
	g.Expect(sandbox.ObjectSelector.MatchExpressions).To(ConsistOf(metav1.LabelSelectorRequirement{
		Key: "role", Operator: metav1.LabelSelectorOpIn, Values: []string{"controller-manager"}}))

	ns := shootNamespace(t, "sandbox")
	createCluster(t, ns, `{"spec": {"region": "sandbox-west-1"}}`)

	kcm := readDeployment(t, "seed-001-kube-controller-manager.yaml")
	stored, err := create(ctx, ns, kcm)
	g.Expect(err).NotTo(HaveOccurred())
	c := stored.Spec.Template.Spec.Containers[0]
	g.Expect(c.Command).To(ContainElements("--cloud-provider=external", "--cluster-name="+ns, "--controllers=*,bootstrapsigner,tokencleaner,-nodeipam"))
	g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "SANDBOX_REGION", Value: "sandbox-west-1"}))
}

// createCluster creates the namespace's Cluster, as Gardener does before the control plane.
func createCluster(t testing.TB, namespace, shoot string) {
	t.Helper()
	empty := runtime.RawExtension{Raw: []byte("{}")}
	cluster := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: namespace}, Spec: extensionsv1alpha1.ClusterSpec{
		Shoot: runtime.RawExtension{Raw: []byte(shoot)}, Seed: &runtime.RawExtension{Raw: []byte("{}")}, CloudProfile: empty}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), cluster)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
}

// aws mutates by the shoot's Kubernetes version: an aws control-plane Deployment in a
// namespace without a Cluster, or whose shoot's version is no semantic version, is
// refused with the field named, never stored with a guess.
func TestAWSDeploymentsNeedTheShootVersion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startWebhook(t)
	kcm := readDeployment(t, "seed-001-kube-controller-manager.yaml")

	_, err := create(ctx, shootNamespace(t, "aws"), kcm)
	g.Expect(err).To(MatchError(ContainSubstring("cluster.spec.shoot.spec.kubernetes.version: Required value: there is no Cluster for the namespace")))

	ns := shootNamespace(t, "aws")
	createCluster(t, ns, `{"spec": {"kubernetes": {"version": "latest"}}}`)
	_, err = create(ctx, ns, kcm)
	g.Expect(err).To(MatchError(ContainSubstring(`cluster.spec.shoot.spec.kubernetes.version: Invalid value: "latest": not a semantic version`)))

	// A shoot of today's Kubernetes gets the external cloud provider only.
	created, err := create(ctx, awsShootNamespace(t, "1.37.1"), kcm)
	g.Expect(err).NotTo(HaveOccurred())
	command := created.Spec.Template.Spec.Containers[0].Command
	g.Expect(command).To(ContainElement("--cloud-provider=external"))
	g.Expect(command).NotTo(ContainElement(HavePrefix("--cloud-config")))
	g.Expect(command).NotTo(ContainElement(HavePrefix("--external-cloud-volume-plugin")))
	g.Expect(created.Spec.Template.Spec.Volumes).To(BeEmpty())
}

// The webhook speaks HTTP/1.1 only (HTTP/2 is where the rapid-reset attacks live) and TLS
// 1.2 at least, preferring 1.3.
//
// Go's servers refuse TLS 1.0 and 1.1 by default, unless GODEBUG=tls10server=1, which
// an operator may set for the whole binary: the webhook refuses them on its own, by its
// MinVersion. The test runs with that setting, and shows first that a server of Go's
// defaults (with the webhook's certificate) then accepts the TLS 1.1 client the webhook
// refuses.
func TestWebhookServesHTTP1OverTLS12OrLater(t *testing.T) {
	t.Setenv("GODEBUG", "tls10server=1")
	g := NewWithT(t)
	w := startWebhook(t)
	secret := w.secret(g)
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
	address := net.JoinHostPort("localhost", strconv.Itoa(w.port))
	tls11 := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}

	certificate, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	g.Expect(err).NotTo(HaveOccurred())
	listener, err := tls.Listen("tcp", "localhost:0", &tls.Config{Certificates: []tls.Certificate{certificate}})
	g.Expect(err).NotTo(HaveOccurred())
	defer listener.Close()
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			_ = conn.Close()
		}
	}()
	conn, err := tls.Dial("tcp", net.JoinHostPort("localhost", strconv.Itoa(listener.Addr().(*net.TCPAddr).Port)), tls11)
	g.Expect(err).NotTo(HaveOccurred(), "a server of Go's defaults accepts TLS 1.1 here")
	g.Expect(conn.ConnectionState().Version).To(Equal(uint16(tls.VersionTLS11)))
	g.Expect(conn.Close()).To(Succeed())

	conn, err = tls.Dial("tcp", address, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2", "http/1.1"}})
	g.Expect(err).NotTo(HaveOccurred())
	state := conn.ConnectionState()
	g.Expect(conn.Close()).To(Succeed())
	g.Expect(state.NegotiatedProtocol).To(Equal("http/1.1"), "HTTP/2 is off")
	g.Expect(state.Version).To(Equal(uint16(tls.VersionTLS13)), "TLS 1.3 when the client offers it")

	_, err = tls.Dial("tcp", address, tls11)
	g.Expect(err).To(MatchError(ContainSubstring("protocol version not supported")), "the webhook refuses TLS 1.1")
	conn, err = tls.Dial("tcp", address, &tls.Config{RootCAs: pool, ServerName: "localhost", MaxVersion: tls.VersionTLS12})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.ConnectionState().Version).To(Equal(uint16(tls.VersionTLS12)), "TLS 1.2 is served")
	g.Expect(conn.Close()).To(Succeed())
}

// Admissions run concurrently, each rendering the templates parsed when the provider
// loaded from its own namespace's Cluster: every Deployment comes back mutated for its
// namespace, as one admission alone mutates it (the webhook runs in this process: under
// -race, a render sharing state with another is reported).
func TestConcurrentAdmissions(t *testing.T) {
	ctx := context.Background()
	startWebhook(t, templatedProvider(t))
	kas, kcm := readDeployment(t, "gardener-kube-apiserver.yaml"), readDeployment(t, "seed-001-kube-controller-manager.yaml")

	type admission struct {
		namespace  string
		deployment *appsv1.Deployment
		check      func(Gomega, *appsv1.Deployment)
	}
	var admissions []admission
	for i := range 4 {
		local := shootNamespace(t, "local")
		createCluster(t, local, "{}")
		admissions = append(admissions, admission{local, kcm, func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--cluster-name=" + local))
		}})
		third := shootNamespace(t, "third")
		region := fmt.Sprintf("region-%d", i)
		createCluster(t, third, `{"spec": {"kubernetes": {"version": "1.3`+strconv.Itoa(i)+`.1"}, "region": "`+region+`"}}`)
		admissions = append(admissions, admission{third, kas, func(g Gomega, d *appsv1.Deployment) {
			c := d.Spec.Template.Spec.Containers[0]
			g.Expect(c.Args).To(ContainElements("--cluster-name="+third, "--v=3"))
			g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "REGION", Value: region}))
			g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("ConfigMap.Name", "third-cloud-provider-config")))
		}})
	}
	seeds := awsShootNamespace(t, seedEra)
	admissions = append(admissions, admission{seeds, kas, func(g Gomega, d *appsv1.Deployment) {
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--cloud-provider=aws"))
	}})

	// Failures are reported with t.Errorf, which other goroutines may call.
	cg := NewGomega(func(message string, _ ...int) { t.Errorf("%s", message) })
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 * len(admissions) {
				a := admissions[(i+w)%len(admissions)]
				d := a.deployment.DeepCopy()
				d.Namespace = a.namespace
				if err := env.Client.Create(ctx, d, client.DryRunAll); err != nil {
					t.Errorf("%s: %v", a.namespace, err)
					return
				}
				a.check(cg, d)
			}
		}()
	}
	wg.Wait()
}
