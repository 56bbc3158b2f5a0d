package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
)

const (
	// DefaultHistoryDepth is how many states the history keeps.
	DefaultHistoryDepth = 5
	// annotationHistory lists the entries of a state history, newest first.
	annotationHistory = run.LabelPrefix + "state-history"
	// maxHistoryEntries bounds the entries a history is read with: far more than one
	// object of compressed states holds, so that only a list written by another hand
	// reaches it, and is refused.
	maxHistoryEntries = 1000
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
	object  *object
	// maxSize is the most bytes a state of the history is decoded to (Options.MaxSize).
	maxSize int
}

// HistoryName is the object keeping the last states.
func (o RunObjects) HistoryName() string { return o.StateName() + "-history" }

// ReadHistory reads the history of the run's states, kept in the store's kind of object
// or, where a move between the kinds was cut short, in the other; empty when there is none.
func (o RunObjects) ReadHistory(ctx context.Context, c client.Reader) (*History, error) {
	var kept *object
	for _, storage := range []Storage{o.Storage.orDefault(), o.Storage.orDefault().Other()} {
		found, err := storage.get(ctx, c, o.key(o.HistoryName()))
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the state history: %w", err)
		}
		kept = found
		break
	}
	if kept == nil {
		return &History{maxSize: o.MaxSize}, nil
	}
	h := &History{object: kept, maxSize: o.MaxSize}
	if raw := kept.GetAnnotations()[annotationHistory]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &h.Entries); err != nil {
			return nil, fmt.Errorf("%w: %s %s annotation %s: %v", ErrCorrupt, kept.kind(), kept.GetName(), annotationHistory, err)
		}
	}
	if len(h.Entries) > maxHistoryEntries {
		return nil, fmt.Errorf("%w: %s %s annotation %s lists %d states, more than the %d a history is read with",
			ErrCorrupt, kept.kind(), kept.GetName(), annotationHistory, len(h.Entries), maxHistoryEntries)
	}
	return h, nil
}

// State returns the state of an entry, checked to be the entry's serial and lineage, and
// decoded to at most the bound states are (Options.MaxSize): one that expands beyond it
// is ErrOverBound, naming the figure, never cut short.
func (h *History) State(e HistoryEntry) ([]byte, error) {
	if h.object == nil {
		return nil, fmt.Errorf("%w: no state history", ErrCorrupt)
	}
	compressed := h.object.binary(e.Key())
	if compressed == nil {
		return nil, fmt.Errorf("%w: %s %s holds no key %s", ErrCorrupt, h.object.kind(), h.object.GetName(), e.Key())
	}
	state, err := GunzipAtMost(bytes.NewReader(compressed), h.maxSize)
	if errors.Is(err, ErrOverBound) {
		return nil, fmt.Errorf("%s %s key %s: %w", h.object.kind(), h.object.GetName(), e.Key(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s key %s: %w", ErrCorrupt, h.object.kind(), h.object.GetName(), e.Key(), err)
	}
	m, err := parseStateMeta(state)
	if err != nil || m.Serial != e.Serial || m.Lineage != e.Lineage {
		return nil, fmt.Errorf("%w: %s %s key %s is not serial %d of lineage %s", ErrCorrupt, h.object.kind(), h.object.GetName(), e.Key(), e.Serial, e.Lineage)
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
	addresses, err := imports.Addresses(state)
	if err != nil {
		return false, err
	}
	entry.Resources = len(addresses)
	compressed, err := compressAndSplit(state, MaxSize)
	if err != nil {
		return false, err
	}
	// The history is kept beside the state (LabelPartOf): it is deleted with it, and
	// moved with it between the kinds of object.
	meta := o.meta(o.HistoryName())
	meta.Labels = mergeMaps(meta.Labels, partOf(o.StateName()))
	base, history := (*object)(nil), o.Storage.orDefault().newObject(meta)
	if h.object != nil && h.object.storage == o.Storage.orDefault() {
		base, history = h.object, h.object.deepCopy()
	}
	previous := h.object
	history.setOnly(entry.Key(), compressed[0])
	kept := []HistoryEntry{entry}
	size := len(compressed[0])
	for _, e := range h.Entries {
		var data []byte
		if previous != nil {
			data = previous.binary(e.Key())
		}
		if data == nil || e.Key() == entry.Key() || len(kept) >= depth {
			continue
		}
		if size+len(data) > defaultObjectLimit-historyMetadataRoom {
			break
		}
		history.setBinary(e.Key(), data)
		kept = append(kept, e)
		size += len(data)
	}
	if len(compressed[0]) > defaultObjectLimit-historyMetadataRoom {
		// A state too large to keep compressed in one object is not kept: the older ones stay.
		return false, nil
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return false, err
	}
	history.SetAnnotations(mergeMaps(history.GetAnnotations(), map[string]string{annotationHistory: string(raw)}))
	return true, o.writeStoreObject(ctx, c, history, base)
}

// historyMetadataRoom is what a history object keeps free for its metadata: its entries'
// list takes about a hundred bytes an entry.
const historyMetadataRoom = 16 << 10

// writeStoreObject creates obj, or patches base, as read, to obj: every write of an object
// of the state store that is not the state itself (the history) goes through here.
func (o RunObjects) writeStoreObject(ctx context.Context, c client.Client, obj, base *object) error {
	var err error
	if base == nil {
		err = obj.create(ctx, c)
	} else {
		err = c.Patch(ctx, obj.Object, client.MergeFromWithOptions(base.Object, client.MergeFromWithOptimisticLock{}))
	}
	if err != nil {
		return fmt.Errorf("writing %s %s: %w", obj.kind(), obj.GetName(), err)
	}
	return nil
}

// Entries of one lineage, newest first.
func (h *History) Lineage(lineage string) []HistoryEntry {
	return slices.DeleteFunc(slices.Clone(h.Entries), func(e HistoryEntry) bool { return lineage != "" && e.Lineage != lineage })
}
