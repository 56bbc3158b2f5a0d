package kinds

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

// A DNSRecord's apply and destroy are urgent runs, which the scheduler starts before the
// other kinds' runs waiting for a slot: gardenlet waits for a DNSRecord at most two
// minutes. An Infrastructure's are not.
func TestADNSRecordsRunsAreUrgentAndAnInfrastructuresNot(t *testing.T) {
	infra := runsOperation(t, newFakeRuns())
	record := &extensionsv1alpha1.DNSRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--p--s", Name: "internal", UID: "uid-2"},
		Spec: extensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &k8sruntime.RawExtension{Raw: []byte(`{}`)}},
			SecretRef:   corev1.SecretReference{Name: "cloudprovider"},
			Name:        "api.s.p.example.com",
			RecordType:  extensionsv1alpha1.DNSRecordTypeA,
			Values:      []string{"192.0.2.1"},
		},
	}
	dns := infra.actuator.operation(request{Object: record, kind: dnsRecordKind})
	for _, c := range []struct {
		op     *operation
		urgent bool
	}{{infra, false}, {dns, true}} {
		g := NewWithT(t)
		ctx := context.Background()
		provider, err := c.op.served()
		g.Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{}
		g.Expect(c.op.actuator.Client.Get(ctx, secretKeyOf(c.op.obj), secret)).To(Succeed())

		apply := &applyScope{provider: provider, secret: secret, rendered: &templates.Rendered{}}
		g.Expect(c.op.request(ctx, apply)).To(Succeed())
		g.Expect(apply.request.Urgent).To(Equal(c.urgent), "the %s's apply is urgent", c.op.kind.name)
		destroy := &deleteScope{}
		g.Expect(c.op.destroyRequest(ctx, destroy)).To(Succeed())
		g.Expect(destroy.request.Urgent).To(Equal(c.urgent), "the %s's destroy is urgent", c.op.kind.name)
	}
}
