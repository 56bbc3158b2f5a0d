package state

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/terraseed/terraseed/terraform/run"
)

// stored lists the names of the objects of kind storage holding the state of objects or
// a part of it.
func stored(g Gomega, objects RunObjects, storage Storage) []string {
	list, err := storage.list(context.Background(), env.Client, objects.ID.Namespace, nil)
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, o := range list {
		if o.GetName() == objects.StateName() || o.GetLabels()[LabelPartOf] == objects.StateName() {
			names = append(names, o.GetName())
		}
	}
	return names
}

func TestParseStorageNamesTheField(t *testing.T) {
	g := NewWithT(t)
	for value, want := range map[string]Storage{"": StorageConfigMap, "configmap": StorageConfigMap, "secret": StorageSecret} {
		got, err := ParseStorage("stateStorage", value)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want))
	}
	_, err := ParseStorage("stateStorage", "Secret")
	g.Expect(err).To(MatchError(run.ErrInvalidInput))
	g.Expect(err.Error()).To(Equal(`stateStorage: "Secret" is neither configmap nor secret`))
}

// With Secret storage the state and every part of it are Secrets, and no ConfigMap holds
// any of it.
func TestSecretStorageKeepsTheWholeStateInSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "secret", Purpose: run.PurposeInfra}, Options: Options{Storage: StorageSecret}}
	store := objects.Store(env.Client)
	store.Limit = 64 << 10

	claimed, err := store.Claim(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(claimed).To(BeEmpty())
	big := stateOf(t, "lineage-a", 1, 300<<10)
	written, err := store.Save(ctx, big)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeTrue())
	g.Expect(len(stored(g, objects, StorageSecret))).To(BeNumerically(">", 1))
	g.Expect(stored(g, objects, StorageConfigMap)).To(BeEmpty())
	secret := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, secret)).To(Succeed())
	g.Expect(secret.Finalizers).To(ContainElement(Finalizer))

	loaded, err := objects.Store(env.Client).Load(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded).To(Equal(big))

	small := stateOf(t, "lineage-a", 2, 1000)
	_, err = store.Save(ctx, small)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored(g, objects, StorageSecret)).To(Equal([]string{objects.StateName()}))
	loaded, err = objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded).To(Equal(small))

	g.Expect(objects.Delete(ctx, env.Client)).To(Succeed())
	g.Expect(stored(g, objects, StorageSecret)).To(BeEmpty())
}

// A state moves from one kind of object to the other and back, plain and split, and reads
// the same at every step; a run of the other kind never starts beside a state not moved.
func TestStateMovesBetweenKinds(t *testing.T) {
	for _, size := range []int{1000, 300 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			inConfigMap := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "moved", Purpose: run.PurposeInfra}}
			inSecret := inConfigMap
			inSecret.Storage = StorageSecret
			state := stateOf(t, "lineage-a", 7, size)
			store := inConfigMap.Store(env.Client)
			store.Limit = 64 << 10
			_, err := store.Save(ctx, state)
			g.Expect(err).NotTo(HaveOccurred())
			// An object kept beside the state, labelled as its, travels with it.
			beside := inConfigMap.StateName() + ".beside"
			besideData := []byte{0x1f, 0x8b, 0xff, 0x00}
			g.Expect(StorageConfigMap.createOrUpdateAs(ctx, inConfigMap, beside, besideData)).To(Succeed())

			// Before the move, a reader of either kind finds it; a run keeping it in a
			// Secret is refused rather than starting from nothing.
			for _, objects := range []RunObjects{inConfigMap, inSecret} {
				loaded, err := objects.ReadState(ctx, env.Client)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(loaded).To(Equal(state))
			}
			_, err = inSecret.Store(env.Client).Claim(ctx)
			g.Expect(err).To(MatchError(errNotMoved))
			g.Expect(stored(g, inSecret, StorageSecret)).To(BeEmpty())

			for _, to := range []RunObjects{inSecret, inConfigMap} {
				from := to.Storage.Other()
				moved, err := to.Store(env.Client).Move(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(moved).To(BeTrue())
				g.Expect(stored(g, to, from)).To(BeEmpty())
				g.Expect(stored(g, to, to.Storage)).NotTo(BeEmpty())
				loaded, err := to.Store(env.Client).Claim(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(loaded).To(Equal(state))
				kept, err := to.Storage.get(ctx, env.Client, to.key(beside))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(kept.binary("blob")).To(Equal(besideData))
				g.Expect(kept.GetLabels()).To(HaveKeyWithValue(LabelPartOf, to.StateName()))
				main, err := to.Storage.get(ctx, env.Client, to.key(to.StateName()))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(main.GetAnnotations()).NotTo(HaveKey(AnnotationMovedFrom))
				g.Expect(main.GetFinalizers()).To(ContainElement(Finalizer))
				// Once moved, there is nothing more to move.
				moved, err = to.Store(env.Client).Move(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(moved).To(BeFalse())
			}
		})
	}
}

// A move cut short at any of its writes (the controller killed) leaves a state that
// readers of either kind find whole, and the next move finishes it.
func TestMoveCutShortLeavesAReadableState(t *testing.T) {
	errCrash := errors.New("the controller died here")
	for crashAt := 1; ; crashAt++ {
		g := NewWithT(t)
		ctx := context.Background()
		inConfigMap := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "cut", Purpose: run.PurposeInfra}}
		inSecret := inConfigMap
		inSecret.Storage = StorageSecret
		state := stateOf(t, "lineage-a", 3, 300<<10)
		store := inConfigMap.Store(env.Client)
		store.Limit = 64 << 10
		_, err := store.Save(ctx, state)
		g.Expect(err).NotTo(HaveOccurred())

		// Every write of the move counts; the one numbered crashAt, and all after it, fail.
		writes := 0
		crash := func() error {
			writes++
			if writes >= crashAt {
				return errCrash
			}
			return nil
		}
		watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
		g.Expect(err).NotTo(HaveOccurred())
		dying := interceptor.NewClient(watching, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := crash(); err != nil {
					return err
				}
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := crash(); err != nil {
					return err
				}
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if err := crash(); err != nil {
					return err
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := crash(); err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
		})
		_, err = inSecret.Store(dying).Move(ctx)
		if err == nil {
			g.Expect(crashAt).To(BeNumerically(">", 5), "a move of a split state writes its parts, the state, and deletes the old ones")
			return
		}
		g.Expect(err).To(MatchError(errCrash))
		for _, objects := range []RunObjects{inConfigMap, inSecret} {
			loaded, err := objects.ReadState(ctx, env.Client)
			g.Expect(err).NotTo(HaveOccurred(), "cut short at write %d, read as %s", crashAt, objects.Storage.Kind())
			g.Expect(loaded).To(Equal(state), "cut short at write %d, read as %s", crashAt, objects.Storage.Kind())
		}
		moved, err := inSecret.Store(env.Client).Move(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(moved).To(BeTrue())
		g.Expect(stored(g, inSecret, StorageConfigMap)).To(BeEmpty(), "cut short at write %d", crashAt)
		loaded, err := inSecret.Store(env.Client).Claim(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(loaded).To(Equal(state))
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, inConfigMap.key(inConfigMap.StateName()), &corev1.ConfigMap{}))).To(BeTrue())
	}
}

// createOrUpdateAs writes data under "blob" into the object name of this kind, labelled as
// kept beside the state of objects.
func (s Storage) createOrUpdateAs(ctx context.Context, objects RunObjects, name string, data []byte) error {
	_, err := s.createOrUpdate(ctx, env.Client, objects.meta(name), func(o *object) {
		o.SetLabels(mergeMaps(o.GetLabels(), map[string]string{LabelPartOf: objects.StateName()}))
		o.setBinary("blob", data)
	})
	return err
}

// A move cut short, then a state written by a controller of the old setting, then the
// move again: the newer state is moved, never the copy the first move left.
func TestAMoveCutShortAndResumedLaterTakesTheNewerState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	inConfigMap := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "resumed", Purpose: run.PurposeInfra}}
	inSecret := inConfigMap
	inSecret.Storage = StorageSecret
	older := stateOf(t, "lineage-a", 3, 300<<10)
	store := inConfigMap.Store(env.Client)
	store.Limit = 64 << 10
	_, err := store.Save(ctx, older)
	g.Expect(err).NotTo(HaveOccurred())
	// Cut short after the copy, before the ConfigMap went: the first delete fails.
	watching, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	errCrash := errors.New("the controller died here")
	dying := interceptor.NewClient(watching, interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error { return errCrash },
	})
	_, err = inSecret.Store(dying).Move(ctx)
	g.Expect(err).To(MatchError(errCrash))
	g.Expect(stored(g, inSecret, StorageSecret)).NotTo(BeEmpty())

	// A controller still keeping states in ConfigMaps applies, writing a smaller state.
	newer := stateOf(t, "lineage-a", 4, 1000)
	written, err := inConfigMap.Store(env.Client).Save(ctx, newer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(written).To(BeTrue())

	moved, err := inSecret.Store(env.Client).Move(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).To(BeTrue())
	g.Expect(stored(g, inSecret, StorageConfigMap)).To(BeEmpty())
	loaded, err := inSecret.Store(env.Client).Claim(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded).To(Equal(newer))
}
