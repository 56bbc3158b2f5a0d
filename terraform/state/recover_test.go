package state

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

// Inspect tells a state that is lost (invalid) from one that cannot be read now: over the
// bound, or a part missing, are errors naming the figure, never a state to replace.
func TestInspectTellsAnInvalidStateFromOneThatCannotBeReadNow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "inspect", Purpose: run.PurposeInfra}}
	store := objects.Store(env.Client)
	store.Limit = 64 << 10
	large := stateOf(t, "lineage-a", 1, 200<<10)
	_, err := store.Save(ctx, large)
	g.Expect(err).NotTo(HaveOccurred())
	found, err := objects.Store(env.Client).Inspect(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.State).To(Equal(large))

	bounded := objects
	bounded.MaxSize = 100 << 10
	_, err = bounded.Store(env.Client).Inspect(ctx)
	g.Expect(err).To(MatchError(ErrOverBound))
	g.Expect(err.Error()).To(ContainSubstring("more than 102400 bytes"))

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, cm)).To(Succeed())
	g.Expect(cm.Annotations[annotationParts]).To(Equal("3"))
	part := store.partName(cm.Annotations[AnnotationGeneration], 2)
	g.Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: objects.ID.Namespace, Name: part}})).To(Succeed())
	_, err = objects.Store(env.Client).Inspect(ctx)
	g.Expect(err).To(MatchError(ErrNotReadNow))
	g.Expect(err.Error()).To(ContainSubstring("reading part 3 of 3, ConfigMap %s", part))
	g.Expect(err.Error()).To(ContainSubstring("read twice"))
	_, err = objects.Store(env.Client).Load(ctx)
	g.Expect(err).To(MatchError(ErrNotReadNow))

	// A state that reads but is not the one recorded is invalid: lost, and recovered.
	_, err = store.Save(ctx, stateOf(t, "lineage-a", 3, 200<<10))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, cm)).To(Succeed())
	cm.Annotations[annotationDigest] = "0000"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	found, err = objects.Store(env.Client).Inspect(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.Unreadable).To(MatchError(ErrCorrupt))
	g.Expect(found.State).To(BeNil())
}

// A state read while a save switches it to new parts, whose old parts are deleted, is
// read again once and whole: the new state, never an error.
func TestAStateSplitAgainWhileItIsReadIsReadAgainWhole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "switch", Purpose: run.PurposeInfra}}
	store := objects.Store(env.Client)
	store.Limit = 64 << 10
	_, err := store.Save(ctx, stateOf(t, "lineage-a", 1, 200<<10))
	g.Expect(err).NotTo(HaveOccurred())
	reader := objects.Store(env.Client)
	read, err := reader.get(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	newer := stateOf(t, "lineage-a", 2, 200<<10)
	_, err = store.Save(ctx, newer)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = reader.decode(ctx, read)
	g.Expect(err).To(MatchError(ErrNotReadNow), "the parts the object read names are gone")
	_, state, err := reader.decodeAgain(ctx, read, reader.get)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state).To(Equal(newer))
}
