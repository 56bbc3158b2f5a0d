package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// A state ConfigMap deleted by hand (kubectl delete, its finalizer left in place) does
// not stay terminating: the controller keeps its state in the history, lets the deletion
// finish and writes the state anew, byte for byte, into a new object; an event and the
// StateObjectDeleted condition name the object. Nothing is created again afterwards.
func TestStateObjectDeletedByHandIsWrittenAnewAndReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdShoot(t, "10.250.0.0/19")
	uids := s.liveUIDs(g)
	raw, stored := s.storedState(g)
	objects := s.runObjects()
	old := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), old)).To(Succeed())
	// No history holds the state before: the deletion must not lose it all the same.
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: objectMeta(s.namespace, objects.HistoryName())})).To(Succeed())

	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())

	g.Eventually(func(g Gomega) {
		current := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), current)).To(Succeed())
		g.Expect(current.UID).NotTo(Equal(old.UID), "the deletion finished")
		g.Expect(current.DeletionTimestamp).To(BeNil())
	}).WithTimeout(time.Minute).Should(Succeed())
	again, _ := s.storedState(g)
	g.Expect(again).To(Equal(raw), "the state written anew is the deleted one")
	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(ContainElement(And(HaveField("Serial", stored.Serial), HaveField("Lineage", stored.Lineage))), "the history holds it")

	g.Eventually(func(g Gomega) {
		deleted := condition(s.get(g), kinds.ConditionStateObjectDeleted)
		g.Expect(deleted).NotTo(BeNil())
		g.Expect(deleted.Status).To(Equal(extensionsv1alpha1.ConditionTrue))
		g.Expect(deleted.Reason).To(Equal("StateObjectWrittenAnew"))
		g.Expect(deleted.Message).To(And(ContainSubstring("ConfigMap "+s.namespace+"/"+objects.StateName()), ContainSubstring("written anew"), ContainSubstring(objects.HistoryName())))
		g.Expect(eventReasons(g, s.namespace, s.infra.Name)).To(ContainElement("StateObjectWrittenAnew"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	assertInSync(t, s)
	g.Expect(s.liveUIDs(g)).To(Equal(uids), "nothing was made again")
}

// A state object that carries another party's finalizer besides the controller's is not
// released before that one goes, and the condition says what the deletion waits for;
// once it went, the state is written anew.
func TestStateObjectDeletionWaitsForOthersFinalizers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdShoot(t, "10.250.0.0/19")
	raw, _ := s.storedState(g)
	objects := s.runObjects()
	old := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), old)).To(Succeed())
	old.Finalizers = append(old.Finalizers, "example.com/backup")
	g.Expect(env.Client.Update(ctx, old)).To(Succeed())

	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())
	g.Eventually(func(g Gomega) {
		deleted := condition(s.get(g), kinds.ConditionStateObjectDeleted)
		g.Expect(deleted).NotTo(BeNil())
		g.Expect(deleted.Reason).To(Equal("StateObjectDeletionHeld"))
		g.Expect(deleted.Message).To(ContainSubstring("example.com/backup"))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), old)).To(Succeed())
	g.Expect(old.Finalizers).To(ContainElement("terraseed.gardener.cloud/terraformer"), "held while another finalizer is there")

	old.Finalizers = []string{"terraseed.gardener.cloud/terraformer"}
	g.Expect(env.Client.Update(ctx, old)).To(Succeed())
	g.Eventually(func(g Gomega) {
		current := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, keyOf(s.namespace, objects.StateName()), current)).To(Succeed())
		g.Expect(current.UID).NotTo(Equal(old.UID))
		g.Expect(condition(s.get(g), kinds.ConditionStateObjectDeleted).Reason).To(Equal("StateObjectWrittenAnew"))
	}).WithTimeout(time.Minute).Should(Succeed())
	again, _ := s.storedState(g)
	g.Expect(again).To(Equal(raw))
}

// An apply that changes nothing writes the live state into a history deleted by hand:
// the next loss of the state finds it there, not only through imports.
func TestApplyWritesTheLiveStateIntoAHistoryDeletedByHand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdShoot(t, "10.250.0.0/19")
	_, stored := s.storedState(g)
	objects := s.runObjects()
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: objectMeta(s.namespace, objects.HistoryName())})).To(Succeed())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, keyOf(s.namespace, objects.HistoryName()), &corev1.ConfigMap{}))).To(BeTrue())

	infra := s.reconciled(t)
	g.Expect(condition(infra, kinds.ConditionLastPlan).Message).To(appliedPlanExactly("0 to add, 0 to change, 0 to replace, 0 to destroy"))
	_, after := s.storedState(g)
	g.Expect(after.Serial).To(Equal(stored.Serial), "the apply changed nothing")
	entries, err := kinds.StateHistory(ctx, env.Client, s.ref())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
	g.Expect(entries[0]).To(And(HaveField("Serial", stored.Serial), HaveField("Lineage", stored.Lineage)))
}

func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// The state object of a cluster-scoped kind, kept in the controller's namespace, deleted
// by hand: its BackupBucket is found by the object's name, and the state written anew.
func TestStateObjectOfABackupBucketDeletedByHandIsWrittenAnew(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllerNS := env.Namespace(t)
	garden := env.Namespace(t)
	kubeconfigSecret(t, garden, "backup")
	startControllerWith(t, controllerNS, workDir(t), env.Config, 2, servingKinds(controllerNS))
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: controllerNS, Annotations: map[string]string{kinds.AnnotationGeneratedSecretNamespace: garden}},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local",
			SecretRef: corev1.SecretReference{Name: "backup", Namespace: garden},
		},
	}
	g.Expect(env.Client.Create(ctx, bucket)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), bucket) })
	waitForKind(t, bucket, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	objects := state.RunObjects{ID: run.ID{Namespace: controllerNS, Name: bucket.Name, Purpose: "backupbucket"}}
	raw, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).NotTo(BeEmpty())
	old := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, keyOf(controllerNS, objects.StateName()), old)).To(Succeed())

	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())

	g.Eventually(func(g Gomega) {
		current := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, keyOf(controllerNS, objects.StateName()), current)).To(Succeed())
		g.Expect(current.UID).NotTo(Equal(old.UID))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(bucket), bucket)).To(Succeed())
		deleted := extension.FindCondition(&bucket.Status.DefaultStatus, kinds.ConditionStateObjectDeleted)
		g.Expect(deleted).NotTo(BeNil())
		g.Expect(deleted.Reason).To(Equal("StateObjectWrittenAnew"))
		g.Expect(deleted.Message).To(ContainSubstring(controllerNS + "/" + objects.StateName()))
	}).WithTimeout(time.Minute).Should(Succeed())
	again, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(raw))
}
