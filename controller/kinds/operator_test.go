package kinds_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// Credentials come from the Infrastructure's own namespace: a secretRef into another
// namespace would let whoever writes an Infrastructure run terraform with any credentials
// of the seed. Only the operator may allow it.
func TestSecretRefInAnotherNamespaceIsRefusedUnlessTheOperatorAllowsIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	elsewhere := env.Namespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "cloudprovider"},
		Data:       map[string][]byte{"kubeconfig": adminKubeconfig(t)},
	})).To(Succeed())
	s.infra.Spec.SecretRef = corev1.SecretReference{Namespace: elsewhere, Name: "cloudprovider"}
	refusing := startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())

	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring(`spec.secretRef.namespace: "` + elsewhere + `" is not the Infrastructure's namespace "` + s.namespace + `"`))
	g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{}))).To(BeTrue(), "nothing ran")

	// The operator allows it.
	refusing.stop()
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) { a.AllowCrossNamespaceSecretRefs = true })
	annotate(g, s, extension.OperationReconcile)
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{})).To(Succeed())
}

// A credentials key a provider marks operatorOnly (aws's endpoint, which sends every cloud
// call to the URL it names) is refused unless the operator allows it.
func TestOperatorOnlyCredentialsAreRefusedUnlessTheOperatorAllowsThem(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := zonalShoot(t, 1, false)
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "cloudprovider"}, secret)).To(Succeed())
	secret.Data["endpoint"] = []byte("https://collector.example.com")
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	refusing := startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())

	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("data.endpoint of secret " + s.namespace + "/cloudprovider: only the operator may allow this key"))
	g.Expect(infra.Status.LastError.Description).NotTo(ContainSubstring("collector.example.com"))
	g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	config := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}.ConfigName()
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: config}, &corev1.ConfigMap{}))).To(BeTrue(), "nothing ran")

	refusing.stop()
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) { a.AllowOperatorOnlyCredentials = true })
	annotate(g, s, extension.OperationReconcile)
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
}
