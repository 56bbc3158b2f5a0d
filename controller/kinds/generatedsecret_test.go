package kinds_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
)

func newGeneratingBucket(name, garden string) *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{kinds.AnnotationGeneratedSecretNamespace: garden}},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "generating"}, Region: "region-1",
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
		},
	}
}

// A BackupBucket's status may name any Secret: its deletion deletes only the Secret the
// bucket owns by a controller reference with its UID, and it never takes over a Secret of
// its generated Secret's name that it does not own.
func TestABackupBucketDeletesAndWritesOnlyTheGeneratedSecretItOwns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllerNS := env.Namespace(t)
	garden := env.Namespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: garden, Name: "backup"}, Data: map[string][]byte{"token": []byte("the-bucket-owners-token")}})).To(Succeed())
	startControllerWith(t, controllerNS, workDir(t), env.Config, 2, servingKinds(controllerNS))

	// Someone else's Secret where the second bucket's generated Secret would go.
	taken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: garden, Name: "generated-bucket-" + controllerNS + "-2"}, Data: map[string][]byte{"key": []byte("theirs")}}
	g.Expect(env.Client.Create(ctx, taken)).To(Succeed())
	second := newGeneratingBucket(controllerNS+"-2", garden)
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), second) })
	waitForKind(t, second, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(second.Status.LastError.Description).To(ContainSubstring("the Secret " + garden + "/" + taken.Name + " exists and BackupBucket " + second.Name + " does not own it"))
	g.Expect(env.Client.Get(ctx, keyOf(garden, taken.Name), taken)).To(Succeed())
	g.Expect(taken.OwnerReferences).To(BeEmpty(), "the Secret was not taken over")
	g.Expect(taken.Data).To(Equal(map[string][]byte{"key": []byte("theirs")}))

	bucket := newGeneratingBucket(controllerNS, garden)
	g.Expect(env.Client.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucket) })
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	generated := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, keyOf(garden, "generated-bucket-"+bucket.Name), generated)).To(Succeed())
	g.Expect(metav1.IsControlledBy(generated, bucket)).To(BeTrue(), "the bucket owns its generated Secret by its UID")

	// The status names a Secret the bucket did not make.
	bucket.Status.GeneratedSecretRef = &corev1.SecretReference{Namespace: garden, Name: "backup"}
	g.Expect(env.Client.Status().Update(ctx, bucket)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, bucket)).To(Succeed())
	waitKindGone(t, bucket)
	g.Expect(env.Client.Get(ctx, keyOf(garden, "backup"), &corev1.Secret{})).To(Succeed(), "the Secret the bucket does not own stays")
}
