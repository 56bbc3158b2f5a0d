package terraformer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
)

// goneFixture declares ConfigMaps item-a, item-b and item-c, of which a and b exist, made
// by a run whose state was lost; c is gone since.
func goneFixture(t *testing.T, adopted, recovered map[string]string) *fixture {
	t.Helper()
	g := NewWithT(t)
	f := newFixture(t, 0)
	files := tftest.Config(t, "kubectl")
	delete(files, "outputs.tf")
	files["main.tf"] = `resource "kubectl_manifest" "item" {
  for_each = toset(["a", "b", "c"])
  yaml_body = yamlencode({
    apiVersion = "v1"
    kind       = "ConfigMap"
    metadata   = { name = "item-${each.key}", namespace = var.namespace }
    data       = { key = each.key }
  })
}
`
	blocks := func(ids map[string]string) string {
		var b strings.Builder
		for key, id := range ids {
			fmt.Fprintf(&b, "import {\n  to = kubectl_manifest.item[%q]\n  id = %q\n}\n", key, strings.ReplaceAll(id, "NS", f.Namespace))
		}
		return b.String()
	}
	if adopted != nil {
		files[imports.File] = blocks(adopted)
	}
	if recovered != nil {
		files[imports.RecoveredFile] = blocks(recovered)
	}
	g.Expect(f.Objects.WriteConfig(context.Background(), env.Client, files)).To(Succeed())
	for _, name := range []string{"item-a", "item-b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace}, Data: map[string]string{"key": name[len(name)-1:]}}
		g.Expect(env.Client.Create(context.Background(), cm)).To(Succeed())
	}
	return f
}

func (f *fixture) exists(g Gomega, name string) bool {
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: name}, &corev1.ConfigMap{})
	g.Expect(client404(err)).To(Succeed())
	return err == nil
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

var everyItem = map[string]string{"a": "v1//ConfigMap//item-a//NS", "b": "v1//ConfigMap//item-b//NS", "c": "v1//ConfigMap//item-c//NS"}

func TestARecoveredImportOfAnObjectThatIsGoneIsDroppedAndTheObjectCreatedAgain(t *testing.T) {
	g := NewWithT(t)
	f := goneFixture(t, nil, everyItem)

	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.publishedPlan(g).Changes).To(ConsistOf(
		HaveField("Importing", true), HaveField("Importing", true),
		And(HaveField("Address", `kubectl_manifest.item["c"]`), HaveField("Action", "create"), HaveField("Importing", false))))
	g.Expect(f.exists(g, "item-c")).To(BeTrue())
	g.Expect(f.Output.String()).To(ContainSubstring("not found"), "the first plan failed on the gone object")
}

func TestAnAdoptedImportOfAnObjectThatIsGoneFailsAndCreatesNothing(t *testing.T) {
	g := NewWithT(t)
	f := goneFixture(t, map[string]string{"c": everyItem["c"]}, map[string]string{"a": everyItem["a"]})

	_, err := f.run(run.Apply)
	re := tftest.ExpectRunError(g, err)
	g.Expect(re.Message).To(ContainSubstring(`configmaps "item-c" not found`))
	g.Expect(f.exists(g, "item-c")).To(BeFalse(), "an adoption takes what exists, it never creates")
}

func TestARecoveredImportThatFailsForAnotherReasonBesideAGoneOneCreatesNothing(t *testing.T) {
	g := NewWithT(t)
	f := goneFixture(t, nil, map[string]string{"a": everyItem["a"], "b": "not-an-id", "c": everyItem["c"]})

	_, err := f.run(run.Apply)
	re := tftest.ExpectRunError(g, err)
	g.Expect(re.Message).To(ContainSubstring(`configmaps "item-c" not found`))
	g.Expect(f.exists(g, "item-c")).To(BeFalse(), "one failure that is not a gone object keeps every recovered import")
}
