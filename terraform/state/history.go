package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

const (
	// DefaultHistoryDepth is how many states the history keeps.
	DefaultHistoryDepth = 5
	// AnnotationHistory lists the entries of a state history, newest first.
	AnnotationHistory = run.LabelPrefix + "state-history"
)

// HistoryEntry describes one state kept in the history; the state itself is gzipped
// under its Key in the history object.
type HistoryEntry struct {
	Serial    int64       `json:"serial"`
	Lineage   string      `json:"lineage"`
	Time      metav1.Time `json:"time"`
	Resources int         `json:"resources"`
}

// Key is where the entry's state is kept in the history object.
func (e HistoryEntry) Key() string { return e.Lineage + "." + strconv.FormatInt(e.Serial, 10) }

// History is the states of a run kept besides the live one, newest first.
type History struct {
	Entries []HistoryEntry
	object  *corev1.ConfigMap
}

// HistoryName is the object keeping the last states.
func (o RunObjects) HistoryName() string { return o.StateName() + "-history" }

// ReadHistory reads the history of the run's states; empty when there is none.
func (o RunObjects) ReadHistory(ctx context.Context, c client.Reader) (*History, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, o.key(o.HistoryName()), cm); err != nil {
		if apierrors.IsNotFound(err) {
			return &History{}, nil
		}
		return nil, fmt.Errorf("reading the state history %s: %w", o.HistoryName(), err)
	}
	h := &History{object: cm}
	if raw := cm.Annotations[AnnotationHistory]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &h.Entries); err != nil {
			return nil, fmt.Errorf("%w: ConfigMap %s annotation %s: %v", ErrCorruptState, cm.Name, AnnotationHistory, err)
		}
	}
	return h, nil
}

// State returns the state of an entry, checked to be the entry's serial and lineage.
func (h *History) State(e HistoryEntry) ([]byte, error) {
	if h.object == nil {
		return nil, fmt.Errorf("%w: no state history", ErrCorruptState)
	}
	compressed, ok := h.object.BinaryData[e.Key()]
	if !ok {
		return nil, fmt.Errorf("%w: ConfigMap %s holds no key %s", ErrCorruptState, h.object.Name, e.Key())
	}
	state, err := Gunzip(bytes.NewReader(compressed))
	if err != nil {
		return nil, fmt.Errorf("%w: ConfigMap %s key %s: %w", ErrCorruptState, h.object.Name, e.Key(), err)
	}
	m, err := parseStateMeta(state)
	if err != nil || m.Serial != e.Serial || m.Lineage != e.Lineage {
		return nil, fmt.Errorf("%w: ConfigMap %s key %s is not serial %d of lineage %s", ErrCorruptState, h.object.Name, e.Key(), e.Serial, e.Lineage)
	}
	return state, nil
}

// Find returns the entry of serial, newest first among lineages.
func (h *History) Find(serial int64) (HistoryEntry, bool) {
	for _, e := range h.Entries {
		if e.Serial == serial {
			return e, true
		}
	}
	return HistoryEntry{}, false
}

// AppendHistory keeps state in the history, the newest of at most depth states whose
// compressed bytes fit one object: the oldest go first. A state the history holds already
// costs no write, any other one write. It reports whether it wrote.
func (o RunObjects) AppendHistory(ctx context.Context, c client.Client, state []byte, depth int, now metav1.Time) (bool, error) {
	m, err := parseStateMeta(state)
	if err != nil || depth <= 0 {
		return false, err
	}
	h, err := o.ReadHistory(ctx, c)
	if err != nil {
		return false, err
	}
	entry := HistoryEntry{Serial: m.Serial, Lineage: m.Lineage, Time: now}
	if len(h.Entries) > 0 && h.Entries[0].Serial == entry.Serial && h.Entries[0].Lineage == entry.Lineage {
		return false, nil
	}
	addresses, err := Addresses(state)
	if err != nil {
		return false, err
	}
	entry.Resources = len(addresses)
	compressed, err := compressAndSplit(state, MaxStateSize)
	if err != nil {
		return false, err
	}
	var base *corev1.ConfigMap
	cm := &corev1.ConfigMap{ObjectMeta: o.meta(o.HistoryName())}
	if h.object != nil {
		base, cm = h.object, h.object.DeepCopy()
	}
	previous := cm.BinaryData
	cm.BinaryData = map[string][]byte{entry.Key(): compressed[0]}
	kept := []HistoryEntry{entry}
	size := len(compressed[0])
	for _, e := range h.Entries {
		data, ok := previous[e.Key()]
		if !ok || e.Key() == entry.Key() || len(kept) >= depth {
			continue
		}
		if size+len(data) > DefaultObjectLimit-historyMetadataRoom {
			break
		}
		cm.BinaryData[e.Key()] = data
		kept = append(kept, e)
		size += len(data)
	}
	if len(compressed[0]) > DefaultObjectLimit-historyMetadataRoom {
		// A state too large to keep compressed in one object is not kept: the older ones stay.
		return false, nil
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return false, err
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[AnnotationHistory] = string(raw)
	cm.Data = nil
	return true, o.writeStoreObject(ctx, c, cm, base)
}

// historyMetadataRoom is what a history object keeps free for its metadata: its entries'
// list takes about a hundred bytes an entry.
const historyMetadataRoom = 16 << 10

// writeStoreObject creates cm, or patches base, as read, to cm: every write of an object
// of the state store that is not the state itself (the history) goes through here.
func (o RunObjects) writeStoreObject(ctx context.Context, c client.Client, cm, base *corev1.ConfigMap) error {
	var err error
	if base == nil {
		err = c.Create(ctx, cm)
	} else {
		err = c.Patch(ctx, cm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s: %w", cm.Name, err)
	}
	return nil
}

// Entries of one lineage, newest first.
func (h *History) Lineage(lineage string) []HistoryEntry {
	return slices.DeleteFunc(slices.Clone(h.Entries), func(e HistoryEntry) bool { return lineage != "" && e.Lineage != lineage })
}
