package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/internal/terraform/run"
	"github.com/terraseed/terraseed/internal/terraform/state"
	"github.com/terraseed/terraseed/internal/terraform/terraformer"
	"github.com/terraseed/terraseed/test/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	// What the executors log is not what these tests look at; the runs' output is.
	logf.SetLogger(logr.Discard())
	os.Exit(testenv.Run(m, &env))
}

// fixture is one Infrastructure in its own namespace, with the test configuration
// written to its run objects and a local executor for it.
type fixture struct {
	t          testing.TB
	namespace  string
	objects    state.RunObjects
	executor   *LocalExecutor
	kubeconfig string
	output     *testenv.SyncBuffer
	// gates is the directory of the gates of a chain configuration.
	gates string
}

func newFixture(t testing.TB, resources int) *fixture {
	t.Helper()
	g := NewWithT(t)
	ns := env.Namespace(t)
	f := &fixture{t: t, namespace: ns, objects: state.RunObjects{ID: run.ID{Namespace: ns, Name: "infra", Purpose: run.PurposeInfra}}, output: &testenv.SyncBuffer{}}
	f.writeConfig("testdata/kubectl")
	vars, err := json.Marshal(map[string]any{"namespace": ns, "resources": resources})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.objects.WriteVars(context.Background(), env.Client, vars)).To(Succeed())

	f.executor = &LocalExecutor{
		Client: env.Client,
		Settings: terraformer.Settings{
			Terraform: testenv.Terraform(t),
			Plugins:   run.Plugins{Mirror: testenv.ProviderMirror(t)},
		},
		BaseDir: t.TempDir(),
		Output:  f.output,
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(writeKubeconfig(env.Config, path)).To(Succeed())
	kubeconfig, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	f.kubeconfig = string(kubeconfig)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("TERRASEED_TEST_OUTPUT") != "" {
			t.Logf("terraformer output:\n%s", f.output.String())
		}
	})
	return f
}

func (f *fixture) writeConfig(dir string) {
	f.t.Helper()
	entries, err := os.ReadDir(dir)
	NewWithT(f.t).Expect(err).NotTo(HaveOccurred())
	files := map[string]string{}
	for _, e := range entries {
		content, err := os.ReadFile(filepath.Join(dir, e.Name()))
		NewWithT(f.t).Expect(err).NotTo(HaveOccurred())
		files[e.Name()] = string(content)
	}
	NewWithT(f.t).Expect(f.objects.WriteConfig(context.Background(), env.Client, files)).To(Succeed())
}

func (f *fixture) request(command run.Command) Request {
	return Request{ID: f.objects.ID, Command: command, Env: map[string]string{"TF_VAR_kubeconfig": f.kubeconfig}}
}

func (f *fixture) run(command run.Command) (*run.Result, error) {
	return f.executor.Run(context.Background(), f.request(command))
}

// items are the names of the ConfigMaps the test configuration created.
func (f *fixture) items(g Gomega) []string {
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(f.namespace), client.MatchingLabels{"terraseed-test": "item"})).To(Succeed())
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	sort.Strings(names)
	return names
}

// stateItems are the names of the ConfigMaps the stored state lists, and the ids of the
// terraform_data instances it holds.
func (f *fixture) stateItems(g Gomega) (names, ids []string) {
	state, err := f.objects.ReadState(context.Background(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	names, ids, err = testenv.StateItems(state)
	g.Expect(err).NotTo(HaveOccurred())
	return names, ids
}

// finalizers are those of the config, the vars and the state, in this order.
func (f *fixture) finalizers(g Gomega) [][]string {
	var all [][]string
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: f.objects.ConfigName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: f.objects.VarsName()}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: f.objects.StateName()}},
	} {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		all = append(all, obj.GetFinalizers())
	}
	return all
}

// writeKubeconfig writes cfg as a kubeconfig file: the kubectl provider's and a
// terraformer process's.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientCertificate: cfg.CertFile,
		ClientKeyData: cfg.KeyData, ClientKey: cfg.KeyFile,
		Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
		Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts["run"] = &clientcmdapi.Context{Cluster: "api", AuthInfo: "user"}
	kc.CurrentContext = "run"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
