package localtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/internal/tftest"
	"github.com/terraseed/terraseed/test/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// kubeconfig is what an operator puts into the credentials secret: the admin user of the
// test control plane, written by client-go.
func kubeconfig(t *testing.T) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestApplyAndDestroy: every local case creates its namespace, NetworkPolicies and SSH key
// Secret in the cluster, reports them as providerStatus, and destroy removes them.
func TestApplyAndDestroy(t *testing.T) {
	registry, err := templates.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join("..", "testdata", "cases", "local", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no local cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			in := input(t, dir)
			// Each case gets its own namespace in the shared control plane, and so does a
			// namespace the case names: one destroyed earlier is still terminating, as
			// envtest runs no namespace controller.
			in.Infrastructure.Namespace = env.Namespace(t)
			uniqueConfiguredNamespace(t, in)
			provider, err := registry.Provider("local")
			g.Expect(err).NotTo(HaveOccurred())
			out, err := provider.Render(in)
			g.Expect(err).NotTo(HaveOccurred())
			creds, err := provider.Credentials(&corev1.Secret{Data: map[string][]byte{"kubeconfig": kubeconfig(t)}})
			g.Expect(err).NotTo(HaveOccurred())

			tf := tftest.New(t, out, creds)
			g.Expect(tf.Init(ctx)).To(Succeed())
			g.Expect(tf.Apply(ctx)).To(Succeed())
			outputs, err := tf.Outputs(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			status, err := provider.Status(outputs)
			g.Expect(err).NotTo(HaveOccurred())

			var ps struct {
				APIVersion         string   `json:"apiVersion"`
				Kind               string   `json:"kind"`
				Namespace          string   `json:"namespace"`
				NetworkPolicies    []string `json:"networkPolicies"`
				SSHPublicKeySecret string   `json:"sshPublicKeySecret"`
				Zones              []struct {
					Name, Workers, NetworkPolicy string
				} `json:"zones"`
			}
			g.Expect(json.Unmarshal(status.ProviderStatus.Raw, &ps)).To(Succeed())
			g.Expect(ps.Kind).To(Equal("InfrastructureStatus"))
			g.Expect(ps.Namespace).To(Equal(expectedNamespace(t, in)))
			g.Expect(status.NodesCIDR).NotTo(BeNil())

			// What the status reports is what the cluster holds.
			ns := &corev1.Namespace{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ps.Namespace}, ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "terraseed"))
			policies := &networkingv1.NetworkPolicyList{}
			g.Expect(env.Client.List(ctx, policies, client.InNamespace(ps.Namespace))).To(Succeed())
			var names []string
			for _, p := range policies.Items {
				names = append(names, p.Name)
			}
			sort.Strings(names)
			reported := append([]string{}, ps.NetworkPolicies...)
			sort.Strings(reported)
			g.Expect(names).To(Equal(reported))
			g.Expect(ps.Zones).To(HaveLen(len(ps.NetworkPolicies) - 1 - boolInt(slices.Contains(names, "shoot-networks"))))
			for _, zone := range ps.Zones {
				policy := &networkingv1.NetworkPolicy{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: zone.NetworkPolicy}, policy)).To(Succeed())
				g.Expect(policy.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"topology.kubernetes.io/zone": zone.Name}))
				g.Expect(policy.Spec.Ingress[0].From[0].IPBlock.CIDR).To(Equal(zone.Workers))
			}
			if len(in.Infrastructure.Spec.SSHPublicKey) > 0 {
				secret := &corev1.Secret{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: ps.SSHPublicKeySecret}, secret)).To(Succeed())
				g.Expect(secret.Data["id_rsa.pub"]).To(Equal(in.Infrastructure.Spec.SSHPublicKey))
			} else {
				g.Expect(ps.SSHPublicKeySecret).To(BeEmpty())
			}

			g.Expect(tf.Destroy(ctx)).To(Succeed())
			for _, name := range names {
				err := env.Client.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: name}, &networkingv1.NetworkPolicy{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NetworkPolicy %s survived destroy: %v", name, err)
			}
			if ps.SSHPublicKeySecret != "" {
				err := env.Client.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: ps.SSHPublicKeySecret}, &corev1.Secret{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the SSH key Secret survived destroy: %v", err)
			}
			// envtest runs no namespace controller: a deleted namespace stays Terminating.
			err = env.Client.Get(ctx, client.ObjectKey{Name: ps.Namespace}, ns)
			if err == nil {
				g.Expect(ns.DeletionTimestamp).NotTo(BeNil(), "the namespace was not deleted")
			} else {
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			}
		})
	}
}

func input(t *testing.T, dir string) templates.Input {
	t.Helper()
	in := templates.Input{Infrastructure: &extensionsv1alpha1.Infrastructure{}}
	read(t, filepath.Join(dir, "infrastructure.yaml"), in.Infrastructure)
	if _, err := os.Stat(filepath.Join(dir, "cluster.yaml")); err == nil {
		in.Cluster = &extensionsv1alpha1.Cluster{}
		read(t, filepath.Join(dir, "cluster.yaml"), in.Cluster)
	}
	return in
}

func read(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatal(err)
	}
}

func expectedNamespace(t *testing.T, in templates.Input) string {
	t.Helper()
	var config struct {
		Namespace string `json:"namespace"`
	}
	if err := json.Unmarshal(in.Infrastructure.Spec.ProviderConfig.Raw, &config); err != nil {
		t.Fatal(err)
	}
	if config.Namespace != "" {
		return config.Namespace
	}
	return in.Infrastructure.Namespace + "--" + in.Infrastructure.Name
}

func uniqueConfiguredNamespace(t *testing.T, in templates.Input) {
	t.Helper()
	var config map[string]any
	if err := json.Unmarshal(in.Infrastructure.Spec.ProviderConfig.Raw, &config); err != nil {
		t.Fatal(err)
	}
	if ns, ok := config["namespace"].(string); ok {
		config["namespace"] = ns + "-" + in.Infrastructure.Namespace
		raw, err := json.Marshal(config)
		if err != nil {
			t.Fatal(err)
		}
		in.Infrastructure.Spec.ProviderConfig.Raw = raw
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
