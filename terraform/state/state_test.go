package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

// stateOf builds a state document of about size bytes that gzip cannot shrink much.
func stateOf(t testing.TB, lineage string, serial int64, size int) []byte {
	t.Helper()
	noise := make([]byte, size*3/4)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	state, err := json.Marshal(map[string]any{
		"version": 4, "terraform_version": "1.5.7", "serial": serial, "lineage": lineage,
		"outputs":   map[string]any{"blob": map[string]any{"value": base64.StdEncoding.EncodeToString(noise), "type": "string"}},
		"resources": []any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

func TestStateOfThreeMiBRoundTripsThroughSplitObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "big", Purpose: run.PurposeInfra}}
	store := objects.Store(env.Client)

	big := stateOf(t, "lineage-a", 1, 3<<20)
	g.Expect(len(big)).To(BeNumerically(">=", 3<<20))
	written, err := store.Save(ctx, big)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeTrue())

	main := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, main)).To(Succeed())
	g.Expect(main.Annotations).To(HaveKeyWithValue(annotationEncoding, encodingGzip))
	g.Expect(main.Annotations[annotationParts]).NotTo(BeElementOf("", "1"))
	g.Expect(parts(g, objects)).NotTo(BeEmpty())

	loaded, err := objects.Store(env.Client).Load(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded).To(Equal(big))

	// A smaller state goes back to one plain object and the parts are deleted.
	small := stateOf(t, "lineage-a", 2, 1000)
	_, err = store.Save(ctx, small)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parts(g, objects)).To(BeEmpty())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(main), main)).To(Succeed())
	g.Expect(main.Data[Key]).To(Equal(string(small)))
	g.Expect(main.Annotations).NotTo(HaveKey(annotationEncoding))
}

func TestStateStoreNeverWritesAnOlderOrPartialState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "guard", Purpose: run.PurposeInfra}}
	newer := stateOf(t, "lineage-a", 5, 100)
	_, err := objects.Store(env.Client).Save(ctx, newer)
	g.Expect(err).NotTo(HaveOccurred())

	// A second store, as after a restart, knows nothing but what is stored. An older
	// snapshot is not written, and that is an error naming both serials, never silent.
	store := objects.Store(env.Client)
	written, err := store.Save(ctx, stateOf(t, "lineage-a", 4, 100))
	g.Expect(err).To(MatchError(ErrStale))
	g.Expect(err).To(MatchError(ContainSubstring("serial 5")))
	g.Expect(err).To(MatchError(ContainSubstring("serial 4")))
	g.Expect(written).To(BeFalse())
	// The same snapshot again is nothing lost.
	written, err = store.Save(ctx, newer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeFalse())
	_, err = store.Save(ctx, newer[:len(newer)/2])
	g.Expect(err).To(MatchError(ErrInvalid))
	_, err = store.Save(ctx, stateOf(t, "lineage-b", 9, 100))
	g.Expect(err).To(MatchError(ErrLineageMismatch))

	stored, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(Equal(newer))
}

// A run pod may update its own state ConfigMap: a compromised one that writes a high serial
// into the annotations pins nothing, since the serial and lineage are read from the state
// stored; one that stores a state of a high serial makes every later save an error, not a
// silent skip.
func TestAPinnedSerialNeverSilencesLaterSaves(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "pinned", Purpose: run.PurposeInfra}}
	_, err := objects.Store(env.Client).Save(ctx, stateOf(t, "lineage-a", 5, 100))
	g.Expect(err).NotTo(HaveOccurred())

	pin := func(mutate func(cm *corev1.ConfigMap)) {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, cm)).To(Succeed())
		mutate(cm)
		g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	}
	pin(func(cm *corev1.ConfigMap) { cm.Annotations[AnnotationSerial] = "999999" })
	next := stateOf(t, "lineage-a", 6, 100)
	written, err := objects.Store(env.Client).Save(ctx, next)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeTrue(), "the annotation is not what is stored")
	stored, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(Equal(next))

	// A store that wrote the object itself notices it changed since.
	store := objects.Store(env.Client)
	_, err = store.Save(ctx, stateOf(t, "lineage-a", 7, 100))
	g.Expect(err).NotTo(HaveOccurred())
	pinned := stateOf(t, "lineage-a", 1000, 100)
	pin(func(cm *corev1.ConfigMap) { cm.Data[Key] = string(pinned) })
	written, err = store.Save(ctx, stateOf(t, "lineage-a", 8, 100))
	g.Expect(err).To(MatchError(ErrStale))
	g.Expect(err).To(MatchError(ContainSubstring("serial 1000")))
	g.Expect(written).To(BeFalse())
}

func parts(g Gomega, objects RunObjects) []string {
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(objects.ID.Namespace), client.MatchingLabels{LabelPartOf: objects.StateName()})).To(Succeed())
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	return names
}

func TestDeleteRemovesEverythingARunKept(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	objects := RunObjects{ID: run.ID{Namespace: ns, Name: "gone", Purpose: run.PurposeInfra}}
	neighbour := RunObjects{ID: run.ID{Namespace: ns, Name: "kept", Purpose: run.PurposeInfra}}
	states := map[string][]byte{}
	for _, o := range []RunObjects{objects, neighbour} {
		g.Expect(o.WriteConfig(ctx, env.Client, map[string]string{"main.tf": ""})).To(Succeed())
		g.Expect(o.WriteVars(ctx, env.Client, []byte(`{}`))).To(Succeed())
		// A state split across parts.
		store := o.Store(env.Client)
		store.Limit = 4 << 10
		states[o.ID.Name] = stateOf(t, "lineage-"+o.ID.Name, 1, 32<<10)
		_, err := store.Save(ctx, states[o.ID.Name])
		g.Expect(err).NotTo(HaveOccurred())
		for _, obj := range o.objects() {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			g.Expect(obj.GetFinalizers()).To(ConsistOf(Finalizer), "written for a run, %s is claimed by it", obj.GetName())
		}
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.ID.EnvSecretName()}})).To(Succeed())
	}
	count := func() (int, int) {
		cms := &corev1.ConfigMapList{}
		g.Expect(env.Client.List(ctx, cms, client.InNamespace(ns), client.MatchingLabels{run.LabelInfrastructure: objects.ID.Name})).To(Succeed())
		secrets := &corev1.SecretList{}
		g.Expect(env.Client.List(ctx, secrets, client.InNamespace(ns))).To(Succeed())
		return len(cms.Items), len(secrets.Items)
	}
	cms, secrets := count()
	g.Expect(cms).To(BeNumerically(">", 3), "the config, the state and its parts")
	g.Expect(secrets).To(Equal(4))

	g.Expect(objects.Delete(ctx, env.Client)).To(Succeed())
	cms, secrets = count()
	g.Expect(cms).To(BeZero())
	g.Expect(secrets).To(Equal(2), "the neighbour's vars and credentials")
	for _, obj := range objects.objects() {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))).To(BeTrue(), obj.GetName())
	}
	g.Expect(objects.Delete(ctx, env.Client)).To(Succeed(), "again, with nothing left")

	state, err := neighbour.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state).To(Equal(states[neighbour.ID.Name]))
}

// A compressed state part can expand to far more than the state limit; it is refused
// before it is read whole, with an error that says so.
func TestLoadRefusesAStateThatExpandsBeyondTheLimit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "bomb", Purpose: run.PurposeInfra}}
	var compressed bytes.Buffer
	zw, err := gzip.NewWriterLevel(&compressed, gzip.BestCompression)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = zw.Write(make([]byte, 65<<20))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(zw.Close()).To(Succeed())
	g.Expect(compressed.Len()).To(BeNumerically("<", 512<<10), "one object holds it")
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: objects.ID.Namespace, Name: objects.StateName(), Annotations: map[string]string{
			annotationEncoding: encodingGzip, annotationParts: "1", annotationDigest: "0000",
		}},
		BinaryData: map[string][]byte{Key: compressed.Bytes()},
	})).To(Succeed())

	_, err = objects.Store(env.Client).Load(ctx)
	g.Expect(err).To(MatchError(ErrCorrupt))
	g.Expect(err.Error()).To(ContainSubstring("exceeds 67108864 bytes (64 MiB), the most a state may take"))
	g.Expect(err.Error()).To(ContainSubstring(objects.StateName()))

	// A part count no state of that size has is refused before any part is read.
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, cm)).To(Succeed())
	cm.Annotations[annotationParts] = "1000000"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	_, err = objects.Store(env.Client).Load(ctx)
	g.Expect(err).To(MatchError(ErrCorrupt))
	g.Expect(err.Error()).To(ContainSubstring(annotationParts + `="1000000": more parts than a state of at most 67108864 bytes takes`))
}

// The controller decodes at most what it is given per state (--max-state-size, from its
// memory limit), below the 64 MiB a state may take: a larger state is refused before it is
// held whole, with the figure named; the parts are read one at a time.
func TestADecodeOverTheControllersBoundIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "bounded", Purpose: run.PurposeInfra}}
	large := stateOf(t, "lineage-a", 1, 3<<20)
	_, err := objects.Store(env.Client).Save(ctx, large)
	g.Expect(err).NotTo(HaveOccurred())

	bounded := objects
	bounded.MaxSize = 1 << 20
	_, err = bounded.Store(env.Client).Load(ctx)
	g.Expect(err).To(MatchError(ErrOverBound))
	g.Expect(err.Error()).To(ContainSubstring("more than 1048576 bytes (1.0 MiB), the most this controller decodes of one state"))
	g.Expect(err.Error()).To(ContainSubstring(objects.StateName()))
	_, err = bounded.ReadState(ctx, env.Client)
	g.Expect(err).To(MatchError(ErrOverBound))

	// Within the bound, the same state reads back whole.
	bounded.MaxSize = 4 << 20
	stored, err := bounded.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(Equal(large))
}

// Restore writes a migrated state only over an older snapshot of it or none: a newer
// serial of the same lineage stays, another lineage is refused naming both.
func TestRestoreNeverWritesOverANewerOrAnotherState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "restore", Purpose: run.PurposeInfra}}

	migrated := stateOf(t, "lineage-a", 3, 100)
	written, err := objects.RestoreState(ctx, env.Client, migrated)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeTrue(), "nothing stored yet")

	// An apply after the restore wrote serial 4, then failed; the restore is retried.
	applied := stateOf(t, "lineage-a", 4, 100)
	_, err = objects.Store(env.Client).Save(ctx, applied)
	g.Expect(err).NotTo(HaveOccurred())
	written, err = objects.RestoreState(ctx, env.Client, migrated)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeFalse())
	stored, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(Equal(applied))

	_, err = objects.RestoreState(ctx, env.Client, stateOf(t, "lineage-b", 9, 100))
	g.Expect(err).To(MatchError(ErrLineageMismatch))
	g.Expect(err.Error()).To(ContainSubstring("ConfigMap " + objects.StateName() + " holds lineage lineage-a (serial 4), the state to restore is of lineage lineage-b (serial 9)"))
	_, err = objects.RestoreState(ctx, env.Client, []byte(`{"version":4`))
	g.Expect(err).To(MatchError(ErrInvalid))
	stored, err = objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(Equal(applied))

	// A newer snapshot of the same lineage is written.
	newer := stateOf(t, "lineage-a", 7, 100)
	written, err = objects.RestoreState(ctx, env.Client, newer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeTrue())
	stored, err = objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored).To(Equal(newer))
}

// Parts have fixed names, two generations of them, so that a run's Role can name them;
// the parts an older release named by the state's digest are named for as long as they
// are the current ones.
func TestPartNamesAreFixed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "parts", Purpose: run.PurposeInfra}}
	names := objects.PartNames()
	g.Expect(names).To(ContainElements("parts.infra.tf-state.a-1", "parts.infra.tf-state.b-1"))
	g.Expect(names).To(HaveLen(2 * (MaxSize/defaultObjectLimit + 1)))

	store := objects.Store(env.Client)
	store.Limit = 4 << 10
	for serial := int64(1); serial <= 3; serial++ {
		_, err := store.Save(ctx, stateOf(t, "lineage-a", serial, 32<<10))
		g.Expect(err).NotTo(HaveOccurred())
		written := parts(g, objects)
		g.Expect(written).NotTo(BeEmpty())
		for _, name := range written {
			g.Expect(names).To(ContainElement(name))
		}
	}

	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationGeneration: "0123456789ab", annotationParts: "3"}}}
	g.Expect(objects.LegacyPartNames(legacy)).To(Equal([]string{"parts.infra.tf-state.0123456789ab-1", "parts.infra.tf-state.0123456789ab-2"}))
	legacy.Annotations[AnnotationGeneration] = "a"
	g.Expect(objects.LegacyPartNames(legacy)).To(BeEmpty())
}
