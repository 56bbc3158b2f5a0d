package terraformer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
)

func TestInvalidCredentialsAreUnauthenticated(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 3)
	// A client certificate the cluster's CA never signed.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "intruder"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	g.Expect(err).NotTo(HaveOccurred())
	bad := rest.CopyConfig(env.Config)
	bad.CertData = pemBlock("CERTIFICATE", der)
	bad.KeyData = pemBlock("EC PRIVATE KEY", keyDER)
	f.Kubeconfig, err = tftest.Kubeconfig(bad)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = f.run(run.Apply)
	re := tftest.ExpectRunError(g, err)
	t.Logf("message: %s", re.Message)
	g.Expect(tftest.CodesOf(re)).To(ContainElement(extensionsv1alpha1.ErrorInfraUnauthenticated))
	g.Expect(errorcodes.Retryable(tftest.CodesOf(re))).To(BeFalse())
	g.Expect(re.Phases).To(And(HaveKeyWithValue("init", BeNumerically(">", 0)), HaveKeyWithValue("apply", BeNumerically(">", 0))), "the apply ran, and failed")
	g.Expect(re.Message).To(MatchRegexp(`Unauthorized|provide credentials`))
	g.Expect(f.Items(g)).To(BeEmpty())
}

func TestSyntaxErrorIsAConfigurationProblem(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	f.WriteConfig("syntax-error")

	for _, command := range []run.Command{run.Validate, run.Apply} {
		_, err := f.run(command)
		re := tftest.ExpectRunError(g, err)
		t.Logf("%s: %s", command, re.Message)
		g.Expect(tftest.CodesOf(re)).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
		g.Expect(errorcodes.Retryable(tftest.CodesOf(re))).To(BeFalse())
		g.Expect(re.Message).To(ContainSubstring("Unterminated template string"))
	}
}

func TestResourceConflictIsADependencyError(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	f.WriteConfig("conflict")
	taken := corev1ac.ConfigMap("taken", f.Namespace).WithData(map[string]string{"owner": "someone-else"})
	g.Expect(env.Client.Apply(context.Background(), taken, client.FieldOwner("someone-else"))).To(Succeed())

	_, err := f.run(run.Apply)
	re := tftest.ExpectRunError(g, err)
	t.Logf("message: %s", re.Message)
	g.Expect(tftest.CodesOf(re)).To(ContainElement(extensionsv1alpha1.ErrorInfraDependencies))
	g.Expect(re.Message).To(ContainSubstring("conflict"))
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func TestTerraformOfAnotherVersionIsRefused(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	// No other terraform release can be built here; a script answers `terraform version -json` as 1.4.6 does.
	other := filepath.Join(t.TempDir(), "terraform")
	g.Expect(os.WriteFile(other, []byte("#!/bin/sh\necho '{\"terraform_version\": \"1.4.6\", \"platform\": \"linux_amd64\", \"provider_selections\": {}}'\n"), 0o755)).To(Succeed())
	f.settings.Terraform = other

	_, err := f.run(run.Apply)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("terraform 1.5.7 is not installed"))
	g.Expect(err.Error()).To(ContainSubstring("is terraform 1.4.6"))
	g.Expect(f.Items(g)).To(BeEmpty())
}

// A configuration that terraform init accepts and terraform validate does not fails the
// validation with terraform's own error, a configuration problem.
func TestAValidationSaysWhatIsInvalid(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	g.Expect(f.Objects.WriteConfig(context.Background(), env.Client, map[string]string{"main.tf": "output \"x\" {\n  value = var.undeclared\n}\n"})).To(Succeed())

	_, err := f.run(run.Validate)
	re := tftest.ExpectRunError(g, err)
	t.Logf("message: %s", re.Message)
	g.Expect(re.Message).To(ContainSubstring("Reference to undeclared input variable"))
	g.Expect(tftest.CodesOf(re)).To(Equal([]extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}))
	g.Expect(errors.Is(err, run.ErrTerraformFailed)).To(BeTrue())
}
