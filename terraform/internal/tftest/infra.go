package tftest

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// configurations are the test configurations: kubectl (Infra's, `resources` ConfigMaps
// each named after a terraform_data's id), conflict (a ConfigMap someone else owns) and
// syntax-error.
//
//go:embed testdata
var configurations embed.FS

// Config returns the files of the test configuration of that name, by file name.
func Config(t testing.TB, name string) map[string]string {
	t.Helper()
	dir := path.Join("testdata", name)
	entries, err := fs.ReadDir(configurations, dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		content, err := fs.ReadFile(configurations, path.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(content)
	}
	return files
}

// Infra is one Infrastructure in a namespace of its own, whose run objects hold the
// kubectl test configuration of a number of resources.
type Infra struct {
	T         testing.TB
	Env       *testenv.Environment
	Namespace string
	Objects   state.RunObjects
	// Kubeconfig is the test API server's, for the kubectl provider (TF_VAR_kubeconfig).
	Kubeconfig string
	// Output collects terraform's output, logged when the test failed or
	// TERRASEED_TEST_OUTPUT is set.
	Output *testenv.SyncBuffer
	// gates is the directory of the gates of a chain configuration.
	gates string
}

// NewInfra writes the kubectl test configuration with resources ConfigMaps to the run
// objects of an Infrastructure in a new namespace of env.
func NewInfra(t testing.TB, env *testenv.Environment, resources int) *Infra {
	t.Helper()
	g := gomega.NewWithT(t)
	ns := env.Namespace(t)
	f := &Infra{T: t, Env: env, Namespace: ns, Objects: state.RunObjects{ID: run.ID{Namespace: ns, Name: "infra", Purpose: run.PurposeInfra}}, Output: &testenv.SyncBuffer{}}
	f.WriteConfig("kubectl")
	vars, err := json.Marshal(map[string]any{"namespace": ns, "resources": resources})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(f.Objects.WriteVars(context.Background(), env.Client, vars)).To(gomega.Succeed())
	kubeconfig, err := Kubeconfig(env.Config)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	f.Kubeconfig = kubeconfig
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("TERRASEED_TEST_OUTPUT") != "" {
			t.Logf("terraformer output:\n%s", f.Output.String())
		}
	})
	return f
}

// WriteConfig writes the test configuration of that name (see Config) to the run objects.
func (f *Infra) WriteConfig(name string) {
	f.T.Helper()
	gomega.NewWithT(f.T).Expect(f.Objects.WriteConfig(context.Background(), f.Env.Client, Config(f.T, name))).To(gomega.Succeed())
}

// Items are the names of the ConfigMaps the test configuration created.
func (f *Infra) Items(g gomega.Gomega) []string {
	list := &corev1.ConfigMapList{}
	g.Expect(f.Env.Client.List(context.Background(), list, client.InNamespace(f.Namespace), client.MatchingLabels{"terraseed-test": "item"})).To(gomega.Succeed())
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	sort.Strings(names)
	return names
}

// StateItems are the names of the ConfigMaps the stored state lists, and the ids of the
// terraform_data instances it holds.
func (f *Infra) StateItems(g gomega.Gomega) (names, ids []string) {
	stored, err := f.Objects.ReadState(context.Background(), f.Env.Client)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	names, ids, err = testenv.StateItems(stored)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return names, ids
}

// Finalizers are those of the config, the vars and the state, in this order.
func (f *Infra) Finalizers(g gomega.Gomega) [][]string {
	var all [][]string
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Objects.ConfigName()}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Objects.VarsName()}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Objects.StateName()}},
	} {
		g.Expect(f.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(gomega.Succeed())
		all = append(all, obj.GetFinalizers())
	}
	return all
}

// ExpectEachItemOnceInState checks that n objects exist and the stored state lists
// exactly them, and returns their names.
func (f *Infra) ExpectEachItemOnceInState(g gomega.Gomega, n int) []string {
	items := f.Items(g)
	g.Expect(items).To(gomega.HaveLen(n))
	stateNames, ids := f.StateItems(g)
	g.Expect(stateNames).To(gomega.Equal(items))
	g.Expect(ids).To(gomega.HaveLen(n))
	return items
}

// ExpectNoLostStateEntry checks that every object in the cluster can be found again from
// the stored state: the state lists it, or at least the id it was named after (its create
// was in flight at the kill, and a rerun applies the same name again). An object whose id
// the state does not hold would be created a second time under a new name.
func (f *Infra) ExpectNoLostStateEntry(g gomega.Gomega) (created, listed int) {
	items := f.Items(g)
	names, ids := f.StateItems(g)
	for _, item := range items {
		g.Expect(ids).To(gomega.ContainElement(strings.TrimPrefix(item, "item-")), "the stored state lost the id of %s", item)
	}
	g.Expect(items).To(gomega.ContainElements(names))
	return len(items), len(names)
}
