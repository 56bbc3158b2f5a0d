package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run"
)

// A deletion that finds neither the credentials secret nor the credentials of an earlier
// run says what it would destroy by the object's kind, a DNSRecord's here; the secret
// recreated, it goes on.
func TestADeletionWithoutCredentialsNamesTheKindOfTheObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kubeconfigSecret(t, ns, "dns")
	startControllerWith(t, ns, workDir(t), env.Config, 2, servingKinds(""))
	record := newDNSRecord(ns, "shoot-api", "local", `{"namespace":"`+ns+`"}`, "api.shoot.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.10")
	g.Expect(env.Client.Create(ctx, record)).To(Succeed())
	waitForKind(t, record, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)

	id := run.ID{Namespace: ns, Name: record.Name, Purpose: "dnsrecord"}
	for _, name := range []string{"dns", id.CredentialsName()} {
		g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	}
	g.Expect(env.Client.Delete(ctx, record)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(record), record)).To(Succeed())
		g.Expect(record.Status.LastError).NotTo(BeNil())
		return record.Status.LastError.Description
	}).WithTimeout(time.Minute).Should(And(
		ContainSubstring("recreate the secret to destroy what the DNSRecord made"),
		Not(ContainSubstring("nfrastructure"))))

	kubeconfigSecret(t, ns, "dns")
	waitKindGone(t, record)
	g.Expect(dnsRecordsOf(g, ns)).To(BeEmpty(), "with the secret back, the deletion destroyed the record")
}
