package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

func TestInvalidProviderConfigFailsWithoutARunAndRecovers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	// Host bits set: not canonical.
	s.infra.Spec.ProviderConfig = testenv.LocalProviderConfig("10.250.16.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())

	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(infra.Status.LastError).NotTo(BeNil())
	g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("providerConfig.networks.zones[0].workers"))
	g.Expect(infra.Status.ObservedGeneration).To(BeZero(), "observedGeneration moves only on success")
	g.Expect(infra.Status.Conditions).To(ContainElement(And(
		HaveField("Type", extension.ConditionReady), HaveField("Status", extensionsv1alpha1.ConditionFalse),
		HaveField("Reason", kinds.ReasonInvalidConfiguration))))

	// Nothing was created: no run objects, no finalizer, no target namespace.
	g.Expect(controllerutil.ContainsFinalizer(infra, kinds.InfrastructureFinalizer)).To(BeFalse())
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: objects.ConfigName()}, &corev1.ConfigMap{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{}))).To(BeTrue())

	// Terminal: no retry while nothing changes.
	updated := infra.Status.LastOperation.LastUpdateTime
	g.Consistently(func(g Gomega) {
		g.Expect(s.get(g).Status.LastOperation.LastUpdateTime).To(Equal(updated))
	}).WithTimeout(3 * time.Second).Should(Succeed())

	// Fixing the spec recovers.
	infra.Spec.ProviderConfig = testenv.LocalProviderConfig("10.250.0.0/19")
	g.Expect(env.Client.Update(ctx, infra)).To(Succeed())
	infra = s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(infra.Status.LastError).To(BeNil())
	g.Expect(infra.Status.ObservedGeneration).To(Equal(infra.Generation))
}

func TestMissingSecretThenWrongKubeconfigThenRecovery(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())

	// No secret: a readable error naming it.
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateError)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("spec.secretRef: secret " + s.namespace + "/cloudprovider not found"))
	g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))

	// A kubeconfig whose client certificate the API server does not trust.
	s.createSecret(t, untrustedKubeconfig(t))
	g.Eventually(func(g Gomega) {
		infra = s.get(g)
		g.Expect(infra.Status.LastError).NotTo(BeNil())
		g.Expect(infra.Status.LastError.Codes).To(ContainElement(extensionsv1alpha1.ErrorInfraUnauthenticated))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateError))
	// The kubectl provider words the refusal after what its discovery cache (a run's own,
	// under the run's HOME) held: "Unauthorized", or the API server's message for a 401.
	g.Expect(infra.Status.LastError.Description).To(Or(ContainSubstring("Unauthorized"), ContainSubstring("the server has asked for the client to provide credentials")))
	g.Expect(infra.Status.LastError.Description).NotTo(ContainSubstring("BEGIN"), "no credential material in the status")

	// Fixing the secret recovers.
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "cloudprovider"}, secret)).To(Succeed())
	secret.Data["kubeconfig"] = adminKubeconfig(t)
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	infra = s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(infra.Status.LastError).To(BeNil())
}

// untrustedKubeconfig is the admin kubeconfig with its client certificate replaced by a
// token the API server does not know.
func untrustedKubeconfig(t *testing.T) []byte {
	t.Helper()
	g := NewWithT(t)
	var config map[string]any
	g.Expect(yaml.Unmarshal(adminKubeconfig(t), &config)).To(Succeed())
	users := config["users"].([]any)
	g.Expect(users).To(HaveLen(1))
	users[0].(map[string]any)["user"] = map[string]any{"token": "not-a-token-this-server-knows"}
	out, err := yaml.Marshal(config)
	g.Expect(err).NotTo(HaveOccurred())
	return out
}
