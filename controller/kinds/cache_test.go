package kinds_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// The cache keeps an Infrastructure without its index (.status.state, up to 1 MiB of
// each): a reconcile reads its own from the API server, and the adoption check the
// others' (TestAdoptionRefusesAnIDAnotherInfrastructureHolds). Of the state object and
// the credentials Secret it keeps the metadata the watches read, not their annotations
// (the state object's hold its index).
func TestTheCacheKeepsNoIndex(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, "cloudprovider"), secret)).To(Succeed())
	secret.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 4096)}
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	c := startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(infra.Status.State).NotTo(BeNil(), "the API server's")
	g.Expect(infra.Status.ProviderStatus).NotTo(BeNil(), "the API server's")
	stateObject := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, s.runObjects().StateName()), stateObject)).To(Succeed())
	g.Expect(stateObject.Annotations).To(HaveKey(state.AnnotationIndex), "the API server's")

	g.Eventually(func(g Gomega) {
		cached := &extensionsv1alpha1.Infrastructure{}
		g.Expect(c.cached.Get(ctx, client.ObjectKeyFromObject(infra), cached)).To(Succeed())
		g.Expect(cached.Status.LastOperation).To(HaveField("State", extensionsv1alpha1.LastOperationStateSucceeded))
		g.Expect(cached.Status.State).To(BeNil())
		g.Expect(cached.Status.ProviderStatus).To(BeNil())
		g.Expect(cached.Spec.ProviderConfig).To(BeNil())
		g.Expect(cached.ManagedFields).To(BeEmpty())
		g.Expect(cached.Spec.SecretRef).To(Equal(infra.Spec.SecretRef), "the secretRef index reads it")
		g.Expect(cached.Spec.Type).To(Equal(infra.Spec.Type), "the watch's predicate reads it")

		meta := metadataOf("ConfigMap")
		g.Expect(c.cached.Get(ctx, client.ObjectKeyFromObject(stateObject), meta)).To(Succeed())
		g.Expect(meta.ResourceVersion).To(Equal(stateObject.ResourceVersion))
		g.Expect(meta.Labels).To(HaveKeyWithValue(run.LabelPurpose, string(run.PurposeInfra)))
		g.Expect(meta.Finalizers).To(ContainElement(state.Finalizer))
		g.Expect(meta.Annotations).To(BeEmpty())
		g.Expect(meta.ManagedFields).To(BeEmpty())
		g.Expect(meta.OwnerReferences).To(BeEmpty())

		meta = metadataOf("Secret")
		g.Expect(c.cached.Get(ctx, client.ObjectKeyFromObject(secret), meta)).To(Succeed())
		g.Expect(meta.Annotations).To(BeEmpty())
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// Of a run's other objects, and of a state's history, nothing.
	objects := s.runObjects()
	for kind, name := range map[string]string{"ConfigMap": objects.ConfigName(), "Secret": objects.VarsName()} {
		g.Expect(c.cached.Get(ctx, keyOf(s.namespace, name), metadataOf(kind))).To(Satisfy(apierrors.IsNotFound), "%s %s", kind, name)
		g.Expect(env.Client.Get(ctx, keyOf(s.namespace, name), metadataOf(kind))).To(Succeed(), "the API server's")
	}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.HistoryName()), metadataOf("ConfigMap"))).To(Succeed(), "the API server's")
	g.Expect(c.cached.Get(ctx, keyOf(s.namespace, objects.HistoryName()), metadataOf("ConfigMap"))).To(Satisfy(apierrors.IsNotFound))
}

// Every kind served is cached without its index, not the Infrastructure alone (a seed
// holds four of the other kinds to each Infrastructure), and without what neither the
// watch, the secretRef index nor the progress of a run reads.
func TestTheCacheKeepsOfEveryKindServedWhatItsReadersRead(t *testing.T) {
	g := NewWithT(t)
	served := 0
	class := extensionsv1alpha1.ExtensionClassSeed
	for obj, byObject := range kinds.CachedObjects() {
		subject, ok := obj.(kinds.Subject)
		if !ok {
			continue
		}
		served++
		full := subject.DeepCopyObject().(kinds.Subject)
		full.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "gardenlet"}})
		full.SetAnnotations(map[string]string{"gardener.cloud/operation": "reconcile"})
		*full.GetExtensionSpec() = extensionsv1alpha1.DefaultSpec{Type: "local", Class: &class, ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"zones":[]}`)}}
		lastOperation := &extensionsv1alpha1.LastOperation{Type: extensionsv1alpha1.LastOperationTypeReconcile, State: extensionsv1alpha1.LastOperationStateProcessing, Progress: 40}
		*full.GetExtensionStatus() = extensionsv1alpha1.DefaultStatus{
			State:              &runtime.RawExtension{Raw: []byte(`{"index":"..."}`)},
			ProviderStatus:     &runtime.RawExtension{Raw: []byte(`{"outputs":{}}`)},
			Conditions:         []extensionsv1alpha1.Condition{{Type: "InfrastructureInSync", Message: "in sync"}},
			LastError:          &extensionsv1alpha1.LastError{Description: "failed before"},
			LastOperation:      lastOperation,
			ObservedGeneration: 3,
		}
		g.Expect(byObject.Transform).NotTo(BeNil(), "%T", obj)
		out, err := byObject.Transform(full.DeepCopyObject())
		g.Expect(err).NotTo(HaveOccurred())
		cached := out.(kinds.Subject)
		g.Expect(cached.GetManagedFields()).To(BeEmpty(), "%T", obj)
		g.Expect(cached.GetAnnotations()).To(Equal(full.GetAnnotations()), "%T: the watch's predicates read them", obj)
		g.Expect(*cached.GetExtensionSpec()).To(Equal(extensionsv1alpha1.DefaultSpec{Type: "local", Class: &class}), "%T", obj)
		g.Expect(cached.GetSecretRef()).To(Equal(full.GetSecretRef()), "%T", obj)
		g.Expect(*cached.GetExtensionStatus()).To(Equal(extensionsv1alpha1.DefaultStatus{LastOperation: lastOperation, ObservedGeneration: 3}), "%T", obj)
	}
	g.Expect(served).To(Equal(6), "Infrastructure, BackupBucket, BackupEntry, DNSRecord, Bastion, SelfHostedShootExposure")
}

func metadataOf(kind string) *metav1.PartialObjectMetadata {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return meta
}
