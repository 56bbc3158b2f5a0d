package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/webhook"
	"github.com/terraseed/terraseed/templates"
)

// templatedMutations is a provider's mutation of kube-apiserver whose every value is a
// template rendered from the Cluster: the templates' share of an admission.
const templatedMutations = `deployments:
  kube-apiserver:
    containers:
      kube-apiserver:
        flags:
          - --cluster-name={{ .cluster.name }}
          - '--v={{ if semverCompare ">= 1.35" (dig "spec" "kubernetes" "version" "" .cluster.shoot) }}2{{ else }}3{{ end }}'
        env:
          - name: REGION
            value: '{{ dig "spec" "region" "" .cluster.shoot }}'
        volumeMounts:
          - name: cloud-provider-config
            mountPath: /etc/kubernetes/{{ .type }}
    volumes:
      - name: cloud-provider-config
        configMap:
          name: '{{ .type }}-cloud-provider-config'
`

// templatedProvider is the "third" provider of the templates' tests with templatedMutations.
func templatedProvider(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	third := filepath.Join("..", "..", "templates", "testdata", "providers", "third")
	for _, name := range []string{"provider.yaml", "schema.json", "main.tf.tpl"} {
		data, err := os.ReadFile(filepath.Join(third, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "mutations.yaml"), []byte(templatedMutations), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shootOf is a Cluster's shoot of the Kubernetes version, in a region.
func shootOf(version string) string {
	return `{"spec": {"kubernetes": {"version": "` + version + `"}, "region": "eu-west-1"}}`
}

// admissionCase is Gardener's kube-apiserver Deployment written into one kind of namespace.
type admissionCase struct {
	name string
	// providerType labels the namespace; "" leaves it unlabelled (no webhook is called).
	providerType, version string
	// check says whether a Deployment came back as the case mutates it.
	check func(*appsv1.Deployment) error
}

func hasArg(arg string) func(*appsv1.Deployment) error {
	return func(d *appsv1.Deployment) error {
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, arg) {
			return fmt.Errorf("%s not in %v", arg, d.Spec.Template.Spec.Containers[0].Args)
		}
		return nil
	}
}

var admissionCases = []admissionCase{
	// The API server alone: the baseline the webhook adds to.
	{name: "no-webhook", check: hasArg("--v=2")},
	// A shoot of today: the webhook is called and reads the Cluster; aws changes nothing.
	{name: "aws-1.37", providerType: "aws", version: "1.37.1", check: hasArg("--v=2")},
	// One list flag added: a JSON patch comes back.
	{name: "aws-1.30", providerType: "aws", version: "1.30.2", check: func(d *appsv1.Deployment) error {
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if arg == "--feature-gates=InTreePluginAWSUnregister=true" {
				return nil
			}
		}
		return fmt.Errorf("no feature gate in %v", d.Spec.Template.Spec.Containers[0].Args)
	}},
	// The seeds' era: flags, a list flag, a mount and a volume.
	{name: "aws-1.16", providerType: "aws", version: seedEra, check: hasArg("--cloud-provider=aws")},
	// Every value a template rendered from the Cluster.
	{name: "templated", providerType: "third", version: "1.37.1", check: hasArg("--v=2")},
}

// latencies collects the durations of admissions, from any goroutine.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d ...time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// report reports admissions per second over elapsed, and the median and 99th percentile
// of the latencies, in milliseconds.
func (l *latencies) report(b *testing.B, elapsed time.Duration) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	at := func(q float64) float64 {
		i := int(q*float64(len(l.d))+0.5) - 1
		return float64(l.d[max(0, min(i, len(l.d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(l.d))/elapsed.Seconds(), "admissions/s")
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkAdmission measures what admitting Gardener's kube-apiserver Deployment costs,
// for each admissionCase, on envtest:
//
//   - apiserver/<case>: a dry-run create through envtest's kube-apiserver, which calls the
//     webhook over TLS as on a seed (the full admission chain, nothing stored), one at a
//     time: the latency a writer such as gardenlet sees;
//   - apiserver-parallel/<case>: the same from 8 writers at once: admissions per second;
//   - webhook/<case>: the AdmissionReview the API server sends, posted straight to the
//     webhook over TLS, one at a time: the webhook's own latency, its live read of the
//     Cluster included;
//   - cluster-read: that read alone, a GET of the Cluster.
//
// Each reports admissions/s, p50-ms and p99-ms over its b.N admissions.
func BenchmarkAdmission(b *testing.B) {
	ctx := context.Background()
	w := startWebhook(b, templatedProvider(b))
	kas := readDeployment(b, "gardener-kube-apiserver.yaml")
	namespaces := map[string]string{}
	for _, c := range admissionCases {
		ns := shootNamespace(b, c.providerType)
		if c.providerType != "" {
			createCluster(b, ns, shootOf(c.version))
		}
		namespaces[c.name] = ns
		// Admitted and mutated as the case says before anything is measured.
		d := kas.DeepCopy()
		d.Namespace = ns
		if err := env.Client.Create(ctx, d, client.DryRunAll); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		if err := c.check(d); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
	}
	admit := func(c admissionCase) error {
		d := kas.DeepCopy()
		d.Namespace = namespaces[c.name]
		return env.Client.Create(ctx, d, client.DryRunAll)
	}

	for _, c := range admissionCases {
		b.Run("apiserver/"+c.name, func(b *testing.B) {
			l := &latencies{d: make([]time.Duration, 0, b.N)}
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				if err := admit(c); err != nil {
					b.Fatal(err)
				}
				l.d = append(l.d, time.Since(t0))
			}
			l.report(b, time.Since(start))
		})
	}
	for _, c := range admissionCases {
		b.Run("apiserver-parallel/"+c.name, func(b *testing.B) {
			l := &latencies{}
			// 8 writers, whatever the number of cores.
			b.SetParallelism(max(1, 8/goruntime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					t0 := time.Now()
					if err := admit(c); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				l.add(mine...)
			})
			l.report(b, time.Since(start))
		})
	}

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(w.secret(NewWithT(b)).Data["ca.crt"]) {
		b.Fatal("no CA in the webhook's Secret")
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, MaxIdleConnsPerHost: 8}}
	for _, c := range admissionCases {
		if c.providerType == "" {
			continue
		}
		b.Run("webhook/"+c.name, func(b *testing.B) {
			d := kas.DeepCopy()
			d.Namespace = namespaces[c.name]
			body := admissionReview(b, d)
			url := "https://localhost:" + strconv.Itoa(w.port) + webhook.PathPrefix + c.providerType
			l := &latencies{d: make([]time.Duration, 0, b.N)}
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				if err := postReview(httpClient, url, body); err != nil {
					b.Fatal(err)
				}
				l.d = append(l.d, time.Since(t0))
			}
			l.report(b, time.Since(start))
		})
	}
	b.Run("cluster-read", func(b *testing.B) {
		key := client.ObjectKey{Name: namespaces["aws-1.37"]}
		l := &latencies{d: make([]time.Duration, 0, b.N)}
		start := time.Now()
		for range b.N {
			t0 := time.Now()
			if err := env.Client.Get(ctx, key, &extensionsv1alpha1.Cluster{}); err != nil {
				b.Fatal(err)
			}
			l.d = append(l.d, time.Since(t0))
		}
		l.report(b, time.Since(start))
	})
}

// BenchmarkMutateKubeAPIServer is the mutation alone, in process (BenchmarkMutateDeployment's
// for kube-apiserver): the provider's mutation of Gardener's kube-apiserver Deployment
// rendered from a Cluster and applied, for each admissionCase with a provider.
func BenchmarkMutateKubeAPIServer(b *testing.B) {
	registry, err := templates.NewRegistry(templatedProvider(b))
	if err != nil {
		b.Fatal(err)
	}
	kas := readDeployment(b, "gardener-kube-apiserver.yaml")
	for _, c := range admissionCases {
		if c.providerType == "" {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			p, err := registry.Provider(c.providerType)
			if err != nil {
				b.Fatal(err)
			}
			const ns = "shoot--core--bench"
			cluster := &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: extensionsv1alpha1.ClusterSpec{
				Shoot: runtime.RawExtension{Raw: []byte(shootOf(c.version))}, Seed: &runtime.RawExtension{Raw: []byte("{}")}, CloudProfile: runtime.RawExtension{Raw: []byte("{}")}}}
			d := kas.DeepCopy()
			if _, err := webhook.MutateDeployment(p, d, ns, cluster); err != nil {
				b.Fatal(err)
			}
			if err := c.check(d); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				d := kas.DeepCopy()
				if _, err := webhook.MutateDeployment(p, d, ns, cluster); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// admissionReview is the request the API server sends the webhook for creating d.
func admissionReview(t testing.TB, d *appsv1.Deployment) []byte {
	t.Helper()
	object, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("bench"),
			Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Name:      d.Name,
			Namespace: d.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: object},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// postReview posts an AdmissionReview and fails unless the webhook allowed it.
func postReview(c *http.Client, url string, body []byte) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &review); err != nil {
		return fmt.Errorf("%s: %w", data, err)
	}
	if review.Response == nil || !review.Response.Allowed {
		return fmt.Errorf("not allowed: %s", data)
	}
	return nil
}
