package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// The inventory of what a ControlPlane applied lives in its .status.state: Gardener keeps
// that in the ShootState, so the objects to prune or delete stay known across restarts,
// migrations and restores.
const (
	stateAPIVersion = "controlplane.terraseed.io/v1alpha1"
	stateKind       = "ControlPlaneState"
)

// state is .status.state of a ControlPlane.
type state struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Inventory  []inventoryEntry `json:"inventory"`
	// Rendered is a digest of the objects and providerStatus last applied: while a render
	// yields the same, a reconcile nobody asked for has nothing to do.
	Rendered string `json:"rendered,omitempty"`
}

// inventoryEntry names one applied object as Flux does: "<namespace>_<name>_<group>_<kind>"
// and the version it was applied with.
type inventoryEntry struct {
	ID      string `json:"id"`
	Version string `json:"v"`
}

// inventory is the applied objects, keyed by their ID.
type inventory map[string]inventoryEntry

// record is what .status.state holds: the inventory and the digest of what was applied.
type record struct {
	inventory inventory
	rendered  string
}

func inventoryOf(objects []*unstructured.Unstructured) inventory {
	inv := inventory{}
	for _, obj := range objects {
		id := object.UnstructuredToObjMetadata(obj).String()
		inv[id] = inventoryEntry{ID: id, Version: obj.GroupVersionKind().Version}
	}
	return inv
}

// readState reads .status.state; a state of another shape (none yet, or written by another
// controller) holds no objects.
func readState(cp *extensionsv1alpha1.ControlPlane) (record, error) {
	rec := record{inventory: inventory{}}
	raw := cp.Status.State
	if raw == nil || len(raw.Raw) == 0 {
		return rec, nil
	}
	var s state
	if err := json.Unmarshal(raw.Raw, &s); err != nil {
		return rec, fmt.Errorf("reading the inventory from status.state: %w", err)
	}
	if s.APIVersion != stateAPIVersion || s.Kind != stateKind {
		return rec, nil
	}
	for _, entry := range s.Inventory {
		if _, err := object.ParseObjMetadata(entry.ID); err != nil {
			return rec, fmt.Errorf("status.state: inventory entry %q: %w", entry.ID, err)
		}
		rec.inventory[entry.ID] = entry
	}
	rec.rendered = s.Rendered
	return rec, nil
}

func (rec record) write(cp *extensionsv1alpha1.ControlPlane) {
	s := state{APIVersion: stateAPIVersion, Kind: stateKind, Inventory: []inventoryEntry{}, Rendered: rec.rendered}
	for _, id := range slices.Sorted(maps.Keys(rec.inventory)) {
		s.Inventory = append(s.Inventory, rec.inventory[id])
	}
	raw, err := json.Marshal(s)
	if err != nil {
		panic(err) // strings only
	}
	cp.Status.State = &runtime.RawExtension{Raw: raw}
}

// digest identifies what a render produced.
func digest(objects []*unstructured.Unstructured, providerStatus *runtime.RawExtension) (string, error) {
	h := sha256.New()
	for _, obj := range objects {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return "", err
		}
		h.Write(raw)
		h.Write([]byte{0})
	}
	if providerStatus != nil {
		h.Write(providerStatus.Raw)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// union is every object of both.
func (inv inventory) union(other inventory) inventory {
	out := maps.Clone(inv)
	if out == nil {
		out = inventory{}
	}
	maps.Copy(out, other)
	return out
}

// without is the objects of inv that other lacks.
func (inv inventory) without(other inventory) inventory {
	out := inventory{}
	for id, e := range inv {
		if _, ok := other[id]; !ok {
			out[id] = e
		}
	}
	return out
}

// objects are stubs of the inventory's objects, enough to get or delete them, sorted.
func (inv inventory) objects() []*unstructured.Unstructured {
	var objects []*unstructured.Unstructured
	for _, id := range slices.Sorted(maps.Keys(inv)) {
		meta, err := object.ParseObjMetadata(id)
		if err != nil {
			continue // readState refused these
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(meta.GroupKind.WithVersion(inv[id].Version))
		obj.SetNamespace(meta.Namespace)
		obj.SetName(meta.Name)
		objects = append(objects, obj)
	}
	return objects
}
