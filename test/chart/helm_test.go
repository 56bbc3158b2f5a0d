package chart

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/test/testenv"
)

var (
	env       *testenv.Environment
	chartDir  = mustAbs("../../charts/terraseed")
	repoRoot  = mustAbs("../..")
	valueSets = []string{"default", "local-executor", "providers"}
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

func helmBinary(t testing.TB) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		t.Fatal("HELM is not set: run `make test`, or eval \"$(make -s env)\" first")
	}
	return h
}

func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(err.Error() + ": " + stderr.String() + stdout.String())
	}
	return stdout.String(), nil
}

func valuesFile(set string) string { return filepath.Join(chartDir, "ci", set+"-values.yaml") }

// render runs `helm template` and decodes every object it prints.
func render(t testing.TB, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helm(t, append([]string{"template", "terraseed", chartDir, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var objects []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding helm's output: %v", err)
		}
		if len(u.Object) > 0 {
			objects = append(objects, u)
		}
	}
	return objects
}

func find(objects []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objects {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func convert[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatal("object not rendered")
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func TestLint(t *testing.T) {
	for _, set := range valueSets {
		t.Run(set, func(t *testing.T) {
			out, err := helm(t, "lint", "--strict", chartDir, "-f", valuesFile(set))
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			NewWithT(t).Expect(out).To(ContainSubstring("0 chart(s) failed"))
		})
	}
}

func controllerContainer(t testing.TB, objects []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := convert[appsv1.Deployment](t, find(objects, "Deployment", ""))
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(d.Spec.Template.Spec.Containers))
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// Every value set renders a hardened Deployment whose flags follow the values.
func TestTemplate(t *testing.T) {
	for _, set := range valueSets {
		t.Run(set, func(t *testing.T) {
			g := NewWithT(t)
			objects := render(t, "garden-terraseed", "-f", valuesFile(set))
			d, c := controllerContainer(t, objects)
			pod := d.Spec.Template.Spec

			g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(*pod.SecurityContext.RunAsUser).To(Equal(int64(65532)))
			g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
			g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
			g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
			g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
			g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
			g.Expect(c.Resources.Requests).NotTo(BeEmpty())
			g.Expect(c.Resources.Limits).NotTo(BeEmpty())
			g.Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", "/tmp")))
			g.Expect(pod.ServiceAccountName).To(Equal("terraseed"))
			g.Expect(c.Args[0]).To(Equal("run"))
			g.Expect(c.Args).To(ContainElements("--leader-election-namespace=garden-terraseed", "--heartbeat-namespace=garden-terraseed", "--extension-name=terraseed", "--extension-classes=shoot"))
			g.Expect(c.Args).To(ContainElement("--plugin-mirror=/opt/terraseed/plugins"))
			g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("networking.gardener.cloud/to-runtime-apiserver", "allowed"))
			// The Go runtime's soft memory limit is the container's: garbage is collected
			// before it takes the controller over its limit.
			g.Expect(c.Env).To(ContainElement(And(HaveField("Name", "GOMEMLIMIT"),
				HaveField("ValueFrom.ResourceFieldRef.Resource", "limits.memory"), HaveField("ValueFrom.ResourceFieldRef.ContainerName", c.Name))))

			// Run pods get a Role per shoot namespace from the controller, no ClusterRole.
			g.Expect(find(objects, "ClusterRole", "terraseed-terraformer")).To(BeNil())
			switch set {
			case "default":
				g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
				// The webhook's failurePolicy Fail needs a replica up: a drain leaves one,
				// and the two prefer different nodes.
				pdb := convert[policyv1.PodDisruptionBudget](t, find(objects, "PodDisruptionBudget", "terraseed"))
				g.Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(1))
				g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))
				g.Expect(d.Spec.Template.Spec.Affinity).NotTo(BeNil())
				g.Expect(d.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(ConsistOf(And(
					HaveField("PodAffinityTerm.TopologyKey", "kubernetes.io/hostname"),
					HaveField("PodAffinityTerm.LabelSelector.MatchLabels", d.Spec.Selector.MatchLabels))))
				g.Expect(c.Image).To(Equal("ghcr.io/terraseed/terraseed:0.1.0"))
				g.Expect(c.Args).To(ContainElements("--leader-elect=true", "--concurrency=10", "--max-runs=5", "--drift-share=0.2", "--state-history=5", "--executor=pod",
					"--terraformer-image=ghcr.io/terraseed/terraseed:0.1.0", "--terraformer-service-account=terraseed-terraformer",
					"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--controlplane-allowed-images=registry.k8s.io/,europe-docker.pkg.dev/gardener-project/releases/",
					"--terraformer-memory-limit=2Gi", "--terraformer-cpu-limit=2", "--terraformer-ephemeral-storage-limit=1Gi", "--metrics-secure=true",
					"--state-storage=configmap"))
				// Only the types it is given: aws. The local provider's kubeconfig and
				// providerConfig.namespace reach any namespace of its target cluster, so it is
				// never served unless named.
				g.Expect(c.Args).To(ContainElement("--provider-types=aws"))
				g.Expect(c.Args).NotTo(ContainElement(And(HavePrefix("--provider-types"), ContainSubstring("local"))))
				g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--allow-cross-namespace-secret-refs")), "an operator's choice, off by default")
				g.Expect(c.Args).NotTo(ContainElement(Or(HavePrefix("--terraformer-priority-class-name"), HavePrefix("--terraformer-node-selector"),
					HavePrefix("--terraformer-tolerations"), HavePrefix("--terraformer-topology-spread-constraints"))), "run pods go wherever the scheduler puts them")
				g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--allow-operator-only-credentials")), "an operator's choice, off by default")
				g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--tracing-endpoint")), "no tracing unless a receiver is named")
				g.Expect(c.Ports).To(ContainElement(And(HaveField("Name", "metrics"), HaveField("ContainerPort", int32(8080)))))
				g.Expect(envValue(c, "TERRASEED_LOG_LEVEL")).To(Equal("info"))
				// The state bound follows the memory limit, through the downward API.
				g.Expect(c.Env).To(ContainElement(And(HaveField("Name", "TERRASEED_MEMORY_LIMIT"),
					HaveField("ValueFrom.ResourceFieldRef.Resource", "limits.memory"), HaveField("ValueFrom.ResourceFieldRef.ContainerName", c.Name))))
				g.Expect(envValue(c, "TERRASEED_TERRAFORMER_POD_LABELS")).To(Equal("networking.gardener.cloud/to-dns=allowed," +
					"networking.gardener.cloud/to-private-networks=allowed,networking.gardener.cloud/to-public-networks=allowed," +
					"networking.gardener.cloud/to-runtime-apiserver=allowed"))
				g.Expect(find(objects, "Role", "terraseed-leases")).NotTo(BeNil())
				g.Expect(find(objects, "Service", "terraseed-metrics")).NotTo(BeNil())
				// The control-plane webhook: the API server calls it through its Service; the
				// chart owns the configuration and the certificate Secret the controller fills.
				g.Expect(c.Args).To(ContainElements("--webhook-mode=service", "--webhook-port=9443", "--webhook-namespace=garden-terraseed",
					"--webhook-service=terraseed-webhook", "--webhook-secret=terraseed-webhook-cert", "--webhook-configuration=terraseed-controlplane"))
				g.Expect(c.Ports).To(ContainElement(And(HaveField("Name", "webhook"), HaveField("ContainerPort", int32(9443)))))
				service := convert[corev1.Service](t, find(objects, "Service", "terraseed-webhook"))
				g.Expect(service.Spec.Ports).To(ConsistOf(And(HaveField("Port", int32(443)), HaveField("TargetPort.StrVal", "webhook"))))
				g.Expect(service.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
				g.Expect(find(objects, "Secret", "terraseed-webhook-cert")).NotTo(BeNil())
				g.Expect(find(objects, "MutatingWebhookConfiguration", "terraseed-controlplane")).NotTo(BeNil())
			case "local-executor":
				g.Expect(c.Args).To(ContainElements("--executor=local", "--leader-elect=false", "--terraform=/usr/local/bin/terraform",
					"--work-dir=/tmp/terraseed", "--metrics-bind-address=:9090", "--tracing-endpoint=http://otel-collector.monitoring:4318"))
				g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--terraformer-image")))
				g.Expect(envValue(c, "TERRASEED_LOG_LEVEL")).To(Equal("debug"))
				// Runs are the pod's processes: terminating it leaves them the local
				// executor's stop timeout (1 min) to stop and save the state.
				g.Expect(d.Spec.Template.Spec.TerminationGracePeriodSeconds).To(HaveValue(BeNumerically(">", 60)))
				g.Expect(find(objects, "PodDisruptionBudget", "")).To(BeNil(), "one replica: nothing to keep available through a drain")
				// Without terraformer pods the controller may not touch pods or bind roles.
				// The one Role left is the heartbeat's: Leases in the release's namespace.
				leases := convert[rbacv1.Role](t, find(objects, "Role", ""))
				g.Expect(leases.Name).To(Equal("terraseed-leases"))
				g.Expect(leases.Rules).To(HaveExactElements(HaveField("Resources", Equal([]string{"leases"}))))
				g.Expect(find(objects, "Service", "")).To(BeNil())
				g.Expect(c.Args).To(ContainElement("--webhook-mode=off"))
				g.Expect(c.Ports).NotTo(ContainElement(HaveField("Name", "webhook")))
				g.Expect(find(objects, "MutatingWebhookConfiguration", "")).To(BeNil())
				g.Expect(find(objects, "Secret", "")).To(BeNil())
				role := convert[rbacv1.ClusterRole](t, find(objects, "ClusterRole", "terraseed"))
				for _, r := range role.Rules {
					g.Expect(r.Resources).NotTo(ContainElements(ContainSubstring("pods")))
					// No terraformer to bind (rolebindings remain for the control planes).
					g.Expect(r.ResourceNames).NotTo(ContainElement("terraseed-terraformer"))
				}
			case "providers":
				g.Expect(c.Image).To(Equal("registry.example.com/terraseed@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
				g.Expect(c.Args).To(ContainElements("--allow-cross-namespace-secret-refs", "--allow-operator-only-credentials"))
				g.Expect(c.Args).To(ContainElement("--state-storage=secret"))
				g.Expect(c.Args).To(ContainElements("--provider-types=local,third", "--concurrency=10",
					"--terraformer-image=registry.example.com/terraseed-aws:0.1.0-aws", "--providers-dir=/etc/terraseed/providers"))
				cm := convert[corev1.ConfigMap](t, find(objects, "ConfigMap", "terraseed-providers"))
				g.Expect(cm.Data).To(HaveKeyWithValue("third.schema.json", "{\"type\": \"object\"}\n"))
				var volume *corev1.Volume
				for i := range pod.Volumes {
					if pod.Volumes[i].ConfigMap != nil {
						volume = &pod.Volumes[i]
					}
				}
				g.Expect(volume).NotTo(BeNil())
				g.Expect(volume.ConfigMap.Name).To(Equal(cm.Name))
				g.Expect(volume.ConfigMap.Items).To(ConsistOf(
					corev1.KeyToPath{Key: "third.main.tf.tpl", Path: "third/main.tf.tpl"},
					corev1.KeyToPath{Key: "third.provider.yaml", Path: "third/provider.yaml"},
					corev1.KeyToPath{Key: "third.schema.json", Path: "third/schema.json"},
					corev1.KeyToPath{Key: "third.controlplane.controlplane.yaml", Path: "third/controlplane/controlplane.yaml"},
					corev1.KeyToPath{Key: "third.controlplane.objects.yaml.tpl", Path: "third/controlplane/objects.yaml.tpl"},
					corev1.KeyToPath{Key: "third.controlplane.schema.json", Path: "third/controlplane/schema.json"}))
				g.Expect(d.Spec.Template.Annotations).To(HaveKey("checksum/providers"))
				// The run pods' placement reaches the controller as flags it reads back.
				g.Expect(c.Args).To(ContainElements("--terraformer-priority-class-name=terraform-runs", "--terraformer-node-selector=pool=terraform"))
				tolerations, err := executor.ParseTolerations(flagValue(c, "--terraformer-tolerations"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(tolerations).To(ConsistOf(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "terraform", Effect: corev1.TaintEffectNoSchedule}))
				spread, err := executor.ParseTopologySpreadConstraints(flagValue(c, "--terraformer-topology-spread-constraints"))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(spread).To(ConsistOf(corev1.TopologySpreadConstraint{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway}))
			}
		})
	}
}

// flagValue is the value of the container's flag, "" without it.
func flagValue(c corev1.Container, flag string) string {
	for _, arg := range c.Args {
		if v, ok := strings.CutPrefix(arg, flag+"="); ok {
			return v
		}
	}
	return ""
}

func TestTemplateRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"executor=kubelet", "executor must be pod or local"},
		{"logLevel=trace", "logLevel must be debug, info or error"},
		{"stateStorage=Secret", `stateStorage must be configmap or secret, not "Secret"`},
		{"providers.Bad_Type.main\\.tf\\.tpl=x", "is not a provider type"},
		// The controller serves every provider it knows without --provider-types: the chart
		// always names them.
		// Local runs are the controller's processes, with its token: one tenant only.
		{"executor=local", "executor: local runs terraform and its provider plugins in the controller's pod, with its ServiceAccount token; set singleTenant=true"},
		{"providerTypes=null", "providerTypes: name at least one provider type to serve"},
		{"providerTypes={}", "providerTypes: name at least one provider type to serve"},
	} {
		_, err := helm(t, "template", "terraseed", chartDir, "--set", c.set)
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring(c.want)), c.set)
	}
}

// The chart passes the extension classes served as the list --extension-classes takes.
func TestExtensionClassesAreOneList(t *testing.T) {
	g := NewWithT(t)
	_, c := controllerContainer(t, render(t, "garden-terraseed", "-f", valuesFile("default"), "--set", "extensionClasses={shoot,seed}"))
	g.Expect(c.Args).To(ContainElement("--extension-classes=shoot,seed"))
	g.Expect(c.Args).NotTo(ContainElement(HavePrefix("--extension-class=")))
}

// The chart passes only flags the controller has: an unknown flag would stop it at start.
func TestArgsAreControllerFlags(t *testing.T) {
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "terraseed")
	build := exec.Command("go", "build", "-o", bin, "./cmd/terraseed")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	help, _ := exec.Command(bin, "run", "--help").CombinedOutput()
	var flags []string
	for _, line := range strings.Split(string(help), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "--"); ok {
			flags = append(flags, strings.Fields(f)[0])
		}
	}
	g.Expect(flags).To(ContainElement("terraformer-image"))
	for _, set := range valueSets {
		_, c := controllerContainer(t, render(t, "garden-terraseed", "-f", valuesFile(set)))
		g.Expect(c.Command).To(Equal([]string{"/terraseed"}))
		for _, arg := range c.Args[1:] {
			name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			g.Expect(slices.Contains(flags, name)).To(BeTrue(), "%s: the controller has no flag --%s", set, name)
		}
	}
}
