package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

// gzipped is b compressed as tightly as gzip does.
func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// allocated is how many bytes f allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// An index annotation on the state object is written by whoever may update the object, a
// run among them: reading the state never decodes it, so that a small hostile one (a
// gzip bomb of 64 MiB of entries in 87 KB) costs nothing.
func TestReadingAStateNeverDecodesTheIndexKeptWithIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "bomb", Purpose: run.PurposeInfra}}
	objects.MaxSize = 1 << 20
	_, err := objects.Store(env.Client).Save(ctx, stateOfSerial(1, ""))
	g.Expect(err).NotTo(HaveOccurred())

	expanded := `{"serial":9,"lineage":"l-1","unimportable":[` + strings.Repeat(`"",`, 64<<20/3) + `""]}`
	bomb := "gzip:" + base64.StdEncoding.EncodeToString(gzipped(t, []byte(expanded)))
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.StateName()}, cm)).To(Succeed())
	cm.Annotations[AnnotationIndex] = bomb
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())

	var found *Stored
	bytes := allocated(func() { found, err = objects.Store(env.Client).Inspect(ctx) })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.State).To(Equal(stateOfSerial(1, "")))
	t.Logf("an index annotation of %d bytes expanding to %d: reading the state allocated %d bytes", len(bomb), len(expanded), bytes)
	g.Expect(bytes).To(BeNumerically("<", 4<<20), "the annotation is not decoded")
}

// A history entry is decoded to at most the controller's bound (--max-state-size) and
// refused beyond it, naming the figure; a list of more entries than a history holds is
// refused, never read in part.
func TestAHistoryIsReadWithinTheBound(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "infra", Purpose: run.PurposeInfra}}
	objects.MaxSize = 1 << 20
	large := stateOfSerial(1, strings.Repeat("a", 32<<20))
	_, err := objects.AppendHistory(ctx, env.Client, large, 3, metav1.Now())
	g.Expect(err).NotTo(HaveOccurred())

	h, err := objects.ReadHistory(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Entries).To(HaveLen(1))
	var state []byte
	bytes := allocated(func() { state, err = h.State(h.Entries[0]) })
	g.Expect(err).To(MatchError(ErrOverBound))
	g.Expect(err.Error()).To(ContainSubstring("more than 1048576 bytes (1.0 MiB)"))
	g.Expect(err.Error()).To(ContainSubstring(objects.HistoryName()))
	g.Expect(state).To(BeNil())
	t.Logf("a history entry expanding to %d bytes, bound %d: reading it allocated %d bytes", len(large), objects.MaxSize, bytes)
	g.Expect(bytes).To(BeNumerically("<", 8<<20))

	entries := make([]HistoryEntry, maxHistoryEntries+1)
	raw, err := json.Marshal(entries)
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, objects.key(objects.HistoryName()), cm)).To(Succeed())
	cm.Annotations[annotationHistory] = string(raw)
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	_, err = objects.ReadHistory(ctx, env.Client)
	g.Expect(err).To(MatchError(ErrCorrupt))
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("lists %d states, more than the %d", maxHistoryEntries+1, maxHistoryEntries)))
}
