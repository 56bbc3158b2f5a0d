package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/webhook"
	"github.com/terraseed/terraseed/test/testenv"
)

// monitoringValues turns on everything the chart ships for monitoring.
var monitoringValues = []string{"--set", "grafanaDashboard.enabled=true", "--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"}

// rule is one alerting rule of the chart's PrometheusRule.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// chartRules reads the alerting rules of the rendered PrometheusRule.
func chartRules(t testing.TB, objects []*unstructured.Unstructured) []rule {
	t.Helper()
	pr := find(objects, "PrometheusRule", "")
	if pr == nil {
		t.Fatal("no PrometheusRule rendered")
	}
	raw, err := json.Marshal(pr.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Groups []struct {
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// dashboard is the JSON of the rendered dashboard ConfigMap.
func dashboard(t testing.TB, objects []*unstructured.Unstructured) map[string]any {
	t.Helper()
	cm := convert[corev1.ConfigMap](t, find(objects, "ConfigMap", "terraseed-dashboard"))
	var d map[string]any
	if err := json.Unmarshal([]byte(cm.Data["terraseed.json"]), &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	return d
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// dashboardQueries returns the PromQL of every panel's targets (rows' panels included) and
// of the template variables, with Grafana's variables replaced as Grafana replaces them.
// A variable not known here is left in place, and fails to parse.
func dashboardQueries(t testing.TB, d map[string]any, namespace string) map[string]string {
	t.Helper()
	expand := strings.NewReplacer("$__rate_interval", "5m", "$namespace", namespace).Replace
	queries := map[string]string{}
	var panels func(list []any)
	panels = func(list []any) {
		for _, p := range list {
			panel := p.(map[string]any)
			if nested, ok := panel["panels"].([]any); ok {
				panels(nested)
			}
			targets, _ := panel["targets"].([]any)
			if panel["type"] != "row" && len(targets) == 0 {
				t.Errorf("panel %q has no query", panel["title"])
			}
			for _, target := range targets {
				tg := target.(map[string]any)
				queries[fmt.Sprintf("panel %q %s", panel["title"], tg["refId"])] = expand(tg["expr"].(string))
			}
		}
	}
	panels(d["panels"].([]any))
	for _, v := range d["templating"].(map[string]any)["list"].([]any) {
		variable := v.(map[string]any)
		if variable["type"] != "query" {
			continue
		}
		q := variable["query"].(map[string]any)["query"].(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(<selector>, <label>)", variable["name"], q)
			continue
		}
		queries["variable "+variable["name"].(string)] = m[1]
	}
	return queries
}

// selector is a metric a PromQL expression names, and the labels it matches on.
type selector struct {
	metric string
	labels []string
}

// selectors parses a PromQL expression as Prometheus does and returns the metrics it names.
func selectors(expr string) ([]selector, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var found []selector
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			sel := selector{metric: vs.Name}
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					sel.metric = m.Value
				} else {
					sel.labels = append(sel.labels, m.Name)
				}
			}
			found = append(found, sel)
		}
		return nil
	})
	if len(found) == 0 {
		return nil, fmt.Errorf("%q names no metric", expr)
	}
	return found, nil
}

// targetLabels are the labels Prometheus adds to every series of a scrape target.
var targetLabels = []string{"namespace", "instance"}

// The chart renders its monitoring objects only when asked, and they fit together: the
// dashboard carries the sidecar's label, the ServiceMonitor selects the metrics Service
// (not the webhook's) by its port, the alerts follow the values they depend on.
func TestMonitoringRenders(t *testing.T) {
	g := NewWithT(t)

	// Defaults: the dashboard ConfigMap only; nothing that needs the operator's CRDs.
	objects := render(t, "garden-terraseed")
	g.Expect(find(objects, "ServiceMonitor", "")).To(BeNil())
	g.Expect(find(objects, "PrometheusRule", "")).To(BeNil())
	cm := convert[corev1.ConfigMap](t, find(objects, "ConfigMap", "terraseed-dashboard"))
	g.Expect(cm.Namespace).To(Equal("garden-terraseed"))
	g.Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
	d := dashboard(t, objects)
	g.Expect(d).To(HaveKeyWithValue("uid", "terraseed"))
	// Grafana places panels on a grid 24 wide and tells them apart by id; every query goes
	// to the data source the dashboard's variable picks.
	ids := map[float64]bool{}
	for _, p := range d["panels"].([]any) {
		panel := p.(map[string]any)
		id := panel["id"].(float64)
		g.Expect(ids).NotTo(HaveKey(id), "panel %q", panel["title"])
		ids[id] = true
		grid := panel["gridPos"].(map[string]any)
		g.Expect(grid["x"].(float64)+grid["w"].(float64)).To(BeNumerically("<=", 24), "panel %q", panel["title"])
		targets, _ := panel["targets"].([]any)
		for _, target := range targets {
			g.Expect(target).To(HaveKeyWithValue("datasource", HaveKeyWithValue("uid", "${datasource}")), "panel %q", panel["title"])
		}
	}

	// Turned off, and moved with its label's value changed.
	objects = render(t, "garden-terraseed", "--set", "grafanaDashboard.enabled=false")
	g.Expect(find(objects, "ConfigMap", "terraseed-dashboard")).To(BeNil())
	objects = render(t, "garden-terraseed", "--set", "grafanaDashboard.namespace=monitoring", "--set", "grafanaDashboard.labelValue=terraseed",
		"--set", "grafanaDashboard.annotations.grafana_folder=Gardener")
	cm = convert[corev1.ConfigMap](t, find(objects, "ConfigMap", "terraseed-dashboard"))
	g.Expect(cm.Namespace).To(Equal("monitoring"))
	g.Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "terraseed"))
	g.Expect(cm.Annotations).To(HaveKeyWithValue("grafana_folder", "Gardener"))

	// Everything on.
	objects = render(t, "garden-terraseed", append(monitoringValues, "--set", "serviceMonitor.labels.release=prometheus",
		"--set", "prometheusRule.labels.release=prometheus")...)
	sm := find(objects, "ServiceMonitor", "terraseed")
	g.Expect(sm).NotTo(BeNil())
	g.Expect(sm.GetNamespace()).To(Equal("garden-terraseed"))
	g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	g.Expect(endpoints).To(HaveLen(1))
	port := endpoints[0].(map[string]any)["port"]
	var selected []string
	for _, o := range objects {
		if o.GetKind() != "Service" {
			continue
		}
		labels := o.GetLabels()
		matches := true
		for k, v := range selector {
			matches = matches && labels[k] == v
		}
		if matches {
			selected = append(selected, o.GetName())
			svc := convert[corev1.Service](t, o)
			g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Name", port)))
		}
	}
	g.Expect(selected).To(ConsistOf("terraseed-metrics"))
	_, c := controllerContainer(t, objects)
	g.Expect(c.Ports).To(ContainElement(HaveField("Name", "metrics")))
	pr := find(objects, "PrometheusRule", "terraseed")
	g.Expect(pr).NotTo(BeNil())
	g.Expect(pr.GetLabels()).To(HaveKeyWithValue("release", "prometheus"))
	rules := chartRules(t, objects)
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
		g.Expect(r.Expr).To(ContainSubstring(`namespace="garden-terraseed"`), r.Alert)
		g.Expect(r.Labels).To(HaveKey("severity"), r.Alert)
		g.Expect(r.Annotations).To(HaveKeyWithValue("runbook", "docs/operating.md#"+strings.ToLower(r.Alert)), r.Alert)
	}
	g.Expect(names).To(ContainElements("TerraseedRunsFailing", "TerraseedRunPastDeadline", "TerraseedNoHeartbeat",
		"TerraseedWebhookErrors", "TerraseedWebhookSlow", "TerraseedInfrastructureRunsFailing", "TerraseedInfrastructureDrifted",
		"TerraseedStateNearLimit", "TerraseedStateTooLarge"))
	byName := func(rules []rule, name string) rule {
		for _, r := range rules {
			if r.Alert == name {
				return r
			}
		}
		t.Fatalf("no alert %s", name)
		return rule{}
	}
	g.Expect(byName(rules, "TerraseedRunPastDeadline").Expr).To(ContainSubstring("[8m]"))
	g.Expect(byName(rules, "TerraseedNoHeartbeat").Expr).To(ContainSubstring("leader_election_master_status"))

	// The alerts follow the values: the run deadline, the workers, leader election, the webhook.
	rules = chartRules(t, render(t, "garden-terraseed", append(monitoringValues, "-f", valuesFile("local-executor"),
		"--set", "serviceMonitor.enabled=false", "--set", "runTimeout=90m", "--set", "concurrency=4")...))
	g.Expect(byName(rules, "TerraseedRunPastDeadline").Expr).To(ContainSubstring("[90m]"))
	g.Expect(byName(rules, "TerraseedBacklog").Expr).To(HaveSuffix("> 8"))
	g.Expect(byName(rules, "TerraseedNoHeartbeat").Expr).To(Equal(`absent(terraseed_terraform_runs_in_flight{namespace="garden-terraseed"})`))
	for _, r := range rules {
		g.Expect(r.Alert).NotTo(HavePrefix("TerraseedWebhook"))
	}

	// A ServiceMonitor has nothing to scrape without the metrics Service.
	_, err := helm(t, append([]string{"template", "terraseed", chartDir}, append(monitoringValues, "--set", "metrics.service.enabled=false")...)...)
	g.Expect(err).To(MatchError(ContainSubstring("serviceMonitor.enabled needs metrics.service.enabled")))

	out, err := helm(t, append([]string{"lint", "--strict", chartDir}, monitoringValues...)...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("0 chart(s) failed"))
}

// Every dashboard query and every alert expression parses as PromQL and names only
// metrics that a running controller exposes: the controller binary, run against the
// control plane with the local executor, the leader election and the control-plane
// webhook, has reconciled an Infrastructure and mutated a Deployment when its /metrics is
// read.
func TestMonitoringNamesOnlyExposedMetrics(t *testing.T) {
	g := NewWithT(t)
	exposed := exposedMetrics(t)
	// What the chart's objects are about is there, with samples.
	g.Expect(exposed).To(HaveKey("terraseed_terraform_runs_total"))
	g.Expect(exposed).To(HaveKeyWithValue("terraseed_terraform_run_duration_seconds_bucket", ContainElements("command", "result", "le")))
	g.Expect(exposed).To(HaveKey("controller_runtime_webhook_latency_seconds_bucket"))
	g.Expect(exposed).To(HaveKeyWithValue("leader_election_master_status", ContainElement("name")))
	g.Expect(exposed).To(HaveKey("controller_runtime_reconcile_total"))

	for _, set := range valueSets {
		args := append([]string{"-f", valuesFile(set)}, monitoringValues...)
		if set == "local-executor" {
			// Without the metrics Service there is nothing for a ServiceMonitor to select.
			args = append(args, "--set", "serviceMonitor.enabled=false")
		}
		objects := render(t, "garden-terraseed", args...)
		queries := dashboardQueries(t, dashboard(t, objects), "garden-terraseed")
		for _, r := range chartRules(t, objects) {
			queries["alert "+r.Alert] = r.Expr
			if r.For != "" {
				_, err := model.ParseDuration(r.For)
				g.Expect(err).NotTo(HaveOccurred(), "%s: for", r.Alert)
			}
		}
		g.Expect(len(queries)).To(BeNumerically(">", 20))
		for where, expr := range queries {
			found, err := selectors(expr)
			if err != nil {
				t.Errorf("%s: %s: %v", set, where, err)
				continue
			}
			for _, sel := range found {
				labels, ok := exposed[sel.metric]
				if !ok {
					t.Errorf("%s: %s names %s, which the controller does not expose", set, where, sel.metric)
					continue
				}
				// A matcher on a label the metric does not have selects nothing.
				for _, l := range sel.labels {
					if !slices.Contains(labels, l) && !slices.Contains(targetLabels, l) {
						t.Errorf("%s: %s matches %s on %q, a label it does not have (it has %v)", set, where, sel.metric, l, labels)
					}
				}
			}
		}
	}
}

// exposedMetrics runs the controller and returns the names of the series its /metrics
// serves once it has done some work (histograms by their _bucket, _sum and _count), each
// with the names of its labels.
func exposedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	bin := t.TempDir()
	// The terraformer beside the controller is what its local executor runs, as in the image.
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/terraseed", "./cmd/terraformer")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	kubeconfig, err := env.AdminKubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfigPath, kubeconfig, 0o600)).To(Succeed())

	release := env.Namespace(t)
	configuration := "monitoring-" + release
	metricsAddress := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	logPath := filepath.Join(t.TempDir(), "controller.log")
	log, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	defer log.Close()
	cmd := exec.Command(filepath.Join(bin, "terraseed"), "run", "--kubeconfig", kubeconfigPath,
		"--executor=local", "--terraform", testenv.Terraform(t), "--plugin-mirror", testenv.ProviderMirror(t),
		"--work-dir", t.TempDir(), "--provider-types=local",
		"--metrics-bind-address", metricsAddress, "--metrics-secure=false", "--health-probe-bind-address=0",
		"--leader-elect=true", "--leader-election-namespace", release, "--heartbeat-namespace", release,
		"--webhook-mode=url", "--webhook-port", fmt.Sprint(testenv.FreePort(t)), "--webhook-namespace", release,
		"--webhook-configuration", configuration, "--webhook-cert-dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = log, log
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		// Its configuration would send the next tests' Deployments to a webhook that is gone.
		_ = env.Client.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: configuration}})
		if t.Failed() {
			text, _ := os.ReadFile(logPath)
			t.Logf("the controller's log:\n%s", text)
		}
	})

	// A shoot namespace of type local, its Cluster, credentials and Infrastructure.
	shoot := env.LabelledNamespace(t, map[string]string{webhook.LabelShootProvider: "local"})
	shootSpec, _ := json.Marshal(map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": "dev", "namespace": "garden-local"},
		"spec": map[string]any{"networking": map[string]any{
			"nodes": "10.250.0.0/16", "pods": "100.96.0.0/11", "services": "100.64.0.0/13",
		}},
	})
	infra := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "infrastructure"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec:  extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: testenv.LocalProviderConfig("10.250.0.0/19")},
			Region:       "local-1",
			SecretRef:    corev1.SecretReference{Name: "cloudprovider", Namespace: shoot},
			SSHPublicKey: []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNhbXBsZQ terraseed@monitoring"),
		},
	}
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shoot, Name: "cloudprovider"}, Data: map[string][]byte{"kubeconfig": kubeconfig}},
		&extensionsv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: shoot},
			Spec: extensionsv1alpha1.ClusterSpec{
				Shoot:        k8sruntime.RawExtension{Raw: shootSpec},
				Seed:         &k8sruntime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":"local"}}`)},
				CloudProfile: k8sruntime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"CloudProfile","metadata":{"name":"local"}}`)},
			},
		},
		infra,
	} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, &extensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: shoot}})
	})
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(infra), infra)).To(Succeed())
		g.Expect(infra.Status.LastOperation).NotTo(BeNil())
		g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "%+v", infra.Status.LastError)
	}).WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())

	// Gardener's kube-controller-manager Deployment goes through the webhook, which adds
	// the local provider's flags.
	deployment := &appsv1.Deployment{}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "controller/webhook/testdata/gardener-kube-controller-manager.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(raw, deployment)).To(Succeed())
	deployment.Namespace = shoot
	g.Eventually(func() error { return env.Client.Create(ctx, deployment) }).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(deployment.Spec.Template.Spec.Containers[0].Command).To(ContainElement("--cluster-name=" + shoot))

	var exposed map[string][]string
	g.Eventually(func(g Gomega) {
		resp, err := http.Get("http://" + metricsAddress + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		text := expfmt.NewTextParser(model.UTF8Validation)
		families, err := text.TextToMetricFamilies(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		exposed = map[string][]string{}
		for name, family := range families {
			if len(family.GetMetric()) == 0 {
				continue
			}
			var labels []string
			for _, m := range family.GetMetric() {
				for _, l := range m.GetLabel() {
					if !slices.Contains(labels, l.GetName()) {
						labels = append(labels, l.GetName())
					}
				}
			}
			sort.Strings(labels)
			switch family.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				exposed[name+"_bucket"] = append(slices.Clone(labels), "le")
				exposed[name+"_sum"], exposed[name+"_count"] = labels, labels
			case dto.MetricType_SUMMARY:
				exposed[name] = append(slices.Clone(labels), "quantile")
				exposed[name+"_sum"], exposed[name+"_count"] = labels, labels
			default:
				exposed[name] = labels
			}
		}
		// The leader's status is reported once it leads, which it did to reconcile.
		g.Expect(exposed).To(HaveKey("leader_election_master_status"))
	}).WithTimeout(time.Minute).Should(Succeed())
	return exposed
}
