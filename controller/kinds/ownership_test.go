package kinds_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
)

// withNamespace makes the shoot's Infrastructure name namespace in providerConfig.
func withNamespace(g Gomega, infra *extensionsv1alpha1.Infrastructure, namespace string) {
	var config map[string]any
	g.Expect(json.Unmarshal(infra.Spec.ProviderConfig.Raw, &config)).To(Succeed())
	config["namespace"] = namespace
	raw, err := json.Marshal(config)
	g.Expect(err).NotTo(HaveOccurred())
	infra.Spec.ProviderConfig = &runtime.RawExtension{Raw: raw}
}

// ownedNamespace is the namespace name, which must exist and whose owner label names uid.
func ownedNamespace(g Gomega, name string, uid string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: name}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue("terraseed.io/owner-uid", uid))
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	return ns
}

// A local namespace belongs to the object that created it, not to the older one: an older
// Infrastructure switched to a newer one's namespace is refused with the owner named, and
// its deletion leaves the namespace to its owner.
func TestALocalNamespaceBelongsToItsOwnerNotToAnOlderInfrastructure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	older := createdShoot(t, "10.250.0.0/19")
	newer := createdShoot(t, "10.250.0.0/19")
	newerUID := string(newer.get(g).UID)
	owned := ownedNamespace(g, newer.targetNamespace(), newerUID)

	infra := older.get(g)
	withNamespace(g, infra, newer.targetNamespace())
	g.Expect(env.Client.Update(ctx, infra)).To(Succeed())
	refused := older.waitFor(t, extensionsv1alpha1.LastOperationTypeReconcile, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(refused.Status.LastError.Description).To(ContainSubstring(`providerConfig.namespace: the namespace "` + newer.targetNamespace() +
		`" that the Infrastructure creates is Infrastructure ` + newer.namespace + `/` + newer.infra.Name + `'s (UID ` + newerUID + `)`))
	g.Expect(refused.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	after := ownedNamespace(g, newer.targetNamespace(), newerUID)
	g.Expect(after.Labels).To(Equal(owned.Labels), "the owner's namespace is untouched")

	g.Expect(env.Client.Delete(ctx, older.get(g))).To(Succeed())
	older.waitGone(t)
	ownedNamespace(g, newer.targetNamespace(), newerUID)
	newer.reconciled(t)
}

// createdEntry is a BackupEntry, and its bucket, that a controller serving the kinds
// created; and the namespace of the entry's prefix.
func createdEntry(t *testing.T, name, garden string) (*extensionsv1alpha1.BackupEntry, string) {
	g := NewWithT(t)
	ctx := context.Background()
	kubeconfigSecret(t, garden, "backup")
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{kinds.AnnotationGeneratedSecretNamespace: garden}},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
		},
	}
	g.Expect(env.Client.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucket) })
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	entry := &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--" + name + "--local--1b2c3d4e"},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local", BucketName: bucket.Name,
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
		},
	}
	g.Expect(env.Client.Create(ctx, entry)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), entry) })
	waitForKind(t, entry, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	return entry, entryMarkers(g, "bucket-"+bucket.Name)[0].Data["backups"]
}

// A BackupEntry's namespace holds a shoot's backups: an Infrastructure that names it is
// refused with the entry named, and its deletion leaves the backups.
func TestALocalNamespaceOfABackupEntryCannotBeTakenByAnInfrastructure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllerNS := env.Namespace(t)
	startControllerWith(t, controllerNS, workDir(t), env.Config, 2, servingKinds(controllerNS))
	entry, backupsNS := createdEntry(t, controllerNS, env.Namespace(t))
	owned := ownedNamespace(g, backupsNS, string(entry.UID))
	g.Expect(owned.Annotations).To(HaveKeyWithValue("terraseed.io/owner", "BackupEntry "+entry.Name))

	taker := newShoot(t, "10.250.0.0/19")
	withNamespace(g, taker.infra, backupsNS)
	taker.createSecret(t, adminKubeconfig(t))
	startController(t, taker.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, taker.infra)).To(Succeed())
	refused := taker.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(refused.Status.LastError.Description).To(ContainSubstring(`providerConfig.namespace: the namespace "` + backupsNS +
		`" that the Infrastructure creates is BackupEntry ` + entry.Name + `'s (UID ` + string(entry.UID) + `)`))
	g.Expect(ownedNamespace(g, backupsNS, string(entry.UID)).Labels).To(Equal(owned.Labels), "the entry's namespace is untouched")

	g.Expect(env.Client.Delete(ctx, taker.get(g))).To(Succeed())
	taker.waitGone(t)
	ownedNamespace(g, backupsNS, string(entry.UID))
}

// An adoption is checked against the indexes of every kind served, by the canonical ID:
// v1//Namespace//x// is the namespace x to the kubectl provider, and a BackupEntry's
// index holds it as v1//Namespace//x.
func TestAdoptionRefusesAnIDABackupEntryHoldsInAnyOfItsForms(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startControllerIn(t, []string{s.namespace}, workDir(t), env.Config, 2, logr.Logger{}, servingKinds(s.namespace))
	entry, backupsNS := createdEntry(t, s.namespace, env.Namespace(t))
	owned := ownedNamespace(g, backupsNS, string(entry.UID))

	id := "v1//Namespace//" + backupsNS + "//"
	s.infra.Annotations = map[string]string{kinds.AnnotationImport: importAnnotation(g, map[string]string{"kubectl_manifest.namespace": id})}
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring(
		`metadata.annotations[terraseed.gardener.cloud/import]: kubectl_manifest.namespace: the ID "v1//Namespace//` + backupsNS + `" is BackupEntry ` + entry.Name + `'s (its kubectl_manifest.backups)`))
	g.Expect(ownedNamespace(g, backupsNS, string(entry.UID)).ResourceVersion).To(Equal(owned.ResourceVersion), "the entry's namespace is untouched")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{})).NotTo(Succeed(), "nothing ran")
}
