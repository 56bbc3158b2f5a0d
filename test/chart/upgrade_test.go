package chart

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An operator who installed with a namespace label removed (set to null, as the e2e
// install does to serve namespaces of any label) and later runs `helm upgrade
// --reuse-values` keeps it removed: helm hands the kept null to the templates as a nil
// value, and a policy rendered from it ("labelled gardener.cloud/role=<nil>") refused every
// write of the controller and every run pod.
func TestAnUpgradeReusingValuesKeepsARemovedNamespaceLabelRemoved(t *testing.T) {
	g := NewWithT(t)
	kubeconfig, err := env.AdminKubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	const release, namespace = "reuse", "reuse-values"
	common := []string{chartDir, "--namespace", namespace, "--kubeconfig", path}
	_, err = helm(t, append([]string{"install", release}, append(common, "--create-namespace",
		"--set", "admissionPolicy.namespaceLabels.gardener\\.cloud/role=null",
		"--set", "terraformer.admissionPolicy.namespaceLabels.gardener\\.cloud/role=null")...)...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _, _ = helm(t, append([]string{"uninstall", release}, common...)...) })
	_, err = helm(t, append([]string{"upgrade", release}, append(common, "--reuse-values", "--set", "logLevel=debug")...)...)
	g.Expect(err).NotTo(HaveOccurred())

	for _, name := range []string{"controller-writes", "terraformer-pods"} {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: release + "-terraseed-" + name}, policy)).To(Succeed())
		for _, v := range policy.Spec.Validations {
			g.Expect(v.Expression).NotTo(ContainSubstring("gardener.cloud/role"), "%s: %s", name, v.Expression)
			g.Expect(v.Expression+v.Message+v.MessageExpression).NotTo(ContainSubstring("nil"), name)
		}
	}
}
