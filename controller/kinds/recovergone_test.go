package kinds_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/state"
)

// A lost state's index may name a resource that is gone since (a run destroyed it and the
// controller never read its end): the recovery cannot import it, and the configuration
// that declares it creates it again, rather than failing for good.
func TestARecoveryCreatesAgainADeclaredResourceItsIndexNamesButIsGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, first := recoveredShoot(t)
	first.stop()

	policies := &networkingv1.NetworkPolicyList{}
	g.Expect(env.Client.List(ctx, policies)).To(Succeed())
	var gone *networkingv1.NetworkPolicy
	for i := range policies.Items {
		if policies.Items[i].Namespace == s.targetNamespace() && policies.Items[i].Name != "deny-all" {
			gone = &policies.Items[i]
		}
	}
	g.Expect(gone).NotTo(BeNil())
	g.Expect(env.Client.Delete(ctx, gone)).To(Succeed())

	objects := s.runObjects()
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), cm)).To(Succeed())
	cm.Data[state.Key] = `{"version":4,"serial":` // cut off
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	history := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: objects.HistoryName()}}
	g.Expect(env.Client.Delete(ctx, history)).To(Succeed())

	startControllerWith(t, s.namespace, workDir(t), env.Config, 2)
	infra := s.reconciled(t)
	g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "%+v", infra.Status.LastError)
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(ContainSubstring("1 to add"))
	again := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, keyOf(gone.Namespace, gone.Name), again)).To(Succeed())
}
