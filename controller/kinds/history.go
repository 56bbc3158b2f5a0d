package kinds

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// ErrRunUnderWay refuses a rollback while a run may write the state.
var ErrRunUnderWay = errors.New("an operation of the object is under way")

// ErrNotInHistory is a rollback to a serial the history does not hold.
var ErrNotInHistory = errors.New("the state history holds no such serial")

// ErrRollbackWouldForget refuses a rollback to a state that lacks resources the live state
// holds whose import IDs are not known: the next apply would create them a second time.
var ErrRollbackWouldForget = errors.New("the rollback would forget resources the live state holds")

// ErrRollbackWouldRebind refuses a rollback to a state that holds a resource under
// another ID than the live state: the live object would be forgotten, and the next apply
// would create it again beside it or bind the address to an object replaced since.
var ErrRollbackWouldRebind = errors.New("the rollback would bind resources to other objects than the live state")

// StateRef names an object whose kept states are read or rolled back.
type StateRef struct {
	// Kind is "infrastructure" (also "") or a kind of templates.Kinds, such as "dnsrecord".
	Kind string
	// Key names the object; a cluster-scoped kind's has no namespace.
	Key client.ObjectKey
	// RunsNamespace is where a cluster-scoped kind's runs are kept: the controller's
	// --runs-namespace.
	RunsNamespace string
}

// resolve checks ref and returns its kind.
func (ref StateRef) resolve() (*kindSpec, error) {
	name := ref.Kind
	if name == "" || name == "infrastructure" {
		name = string(run.PurposeInfra)
	}
	kind, ok := kindsByPurpose[run.Purpose(name)]
	if !ok {
		known := []string{"infrastructure"}
		for _, k := range templates.Kinds {
			known = append(known, string(k))
		}
		return nil, fmt.Errorf("--kind: %q is not a kind served (known: %s)", ref.Kind, strings.Join(known, ", "))
	}
	switch {
	case kind.clusterScoped && ref.Key.Namespace != "":
		return nil, fmt.Errorf("NAME: kind %s is cluster-scoped; name the object without a namespace, not %s", kind.name, ref.Key)
	case kind.clusterScoped && ref.RunsNamespace == "":
		return nil, fmt.Errorf("--runs-namespace: the runs of kind %s are kept in the controller's namespace; name it", kind.name)
	case !kind.clusterScoped && ref.Key.Namespace == "":
		return nil, fmt.Errorf("NAMESPACE/NAME: kind %s is namespaced; %q names no namespace", kind.name, ref.Key.Name)
	}
	return kind, nil
}

// Validate refuses a ref that names no object a state is kept of, naming what is wrong.
func (ref StateRef) Validate() error {
	_, err := ref.resolve()
	return err
}

// subject reads the object ref names, and returns it with the identity of its runs.
func (ref StateRef) subject(ctx context.Context, c client.Client) (Subject, run.ID, error) {
	kind, err := ref.resolve()
	if err != nil {
		return nil, run.ID{}, err
	}
	obj := kind.newObject()
	if err := c.Get(ctx, ref.Key, obj); err != nil {
		return nil, run.ID{}, fmt.Errorf("reading %s %s: %w", kind.name, ref.Key, err)
	}
	return obj, kind.runID(ref.RunsNamespace, obj.GetNamespace(), obj.GetName(), obj.GetUID()), nil
}

// StateHistory lists the states kept of the object ref, newest first.
func StateHistory(ctx context.Context, c client.Client, ref StateRef) ([]tfstate.HistoryEntry, error) {
	_, id, err := ref.subject(ctx, c)
	if err != nil {
		return nil, err
	}
	objects, err := tfstate.RunObjects{ID: id}.Found(ctx, c)
	if err != nil {
		return nil, err
	}
	history, err := objects.ReadHistory(ctx, c)
	if err != nil {
		return nil, err
	}
	return history.Entries, nil
}

// RollbackState makes the state of serial in the history of the object ref the live one,
// as a new serial of the same lineage, so that every writer of the state takes it for the
// newest. It refuses while an operation is under way or a run pod exists, and
// a state of another lineage than the live one. What the live state holds and the older
// one lacks is not forgotten: it is put into the import annotation first, with the IDs
// of the controller's index, so that the next apply imports it rather than create it a
// second time; where an ID is not known, the rollback is refused naming the resources
// (ErrRollbackWouldForget). A resource both hold under different IDs (replaced, or
// destroyed and created again, since) is refused as well, naming it and both IDs
// (ErrRollbackWouldRebind). The live state is kept in the history. It returns the new serial.
func RollbackState(ctx context.Context, c client.Client, ref StateRef, serial int64) (int64, error) {
	obj, id, err := ref.subject(ctx, c)
	if err != nil {
		return 0, err
	}
	if last := obj.GetExtensionStatus().LastOperation; last != nil && last.State == extensionsv1alpha1.LastOperationStateProcessing {
		return 0, fmt.Errorf("%w: %s is %s; roll back once it ended", ErrRunUnderWay, last.Type, last.State)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.PodName()}, &corev1.Pod{}); err == nil {
		return 0, fmt.Errorf("%w: run pod %s exists", ErrRunUnderWay, id.PodName())
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("looking for a run pod: %w", err)
	}
	// The state is written back in the kind of object that holds it.
	objects, err := tfstate.RunObjects{ID: id}.Found(ctx, c)
	if err != nil {
		return 0, err
	}
	history, err := objects.ReadHistory(ctx, c)
	if err != nil {
		return 0, err
	}
	entry, ok := history.Find(serial)
	if !ok {
		return 0, fmt.Errorf("%w: serial %d; it holds %s", ErrNotInHistory, serial, serials(history.Entries))
	}
	target, err := history.State(entry)
	if err != nil {
		return 0, err
	}
	store := objects.Store(c)
	// A live state that cannot be read now is not lost: a rollback over it would forget
	// what it holds.
	live, err := store.Inspect(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the live state: %w; nothing is written", err)
	}
	if live.Lineage != "" && live.Lineage != entry.Lineage {
		return 0, fmt.Errorf("%w: the live state is of lineage %s, serial %d of the history of lineage %s", tfstate.ErrLineageMismatch, live.Lineage, serial, entry.Lineage)
	}
	adopt, err := forgottenImports(obj, live, target, serial)
	if err != nil {
		return 0, err
	}
	if err := rebound(live, target, serial); err != nil {
		return 0, err
	}
	if err := addImports(ctx, c, obj, adopt); err != nil {
		return 0, err
	}
	// The live state stays in the history, so that a rollback can be rolled forward.
	if live.State != nil && len(history.Entries) > 0 {
		if _, err := objects.AppendHistory(ctx, c, live.State, max(len(history.Entries), tfstate.DefaultHistoryDepth), metav1.Now()); err != nil {
			return 0, fmt.Errorf("keeping the live state in the history: %w; nothing is rolled back", err)
		}
	}
	next := live.Serial
	for _, e := range history.Lineage(entry.Lineage) {
		next = max(next, e.Serial)
	}
	next++
	rolledBack, err := withSerial(target, next)
	if err != nil {
		return 0, err
	}
	if live.State != nil {
		_, err = store.Save(ctx, rolledBack)
	} else {
		// A live state that is lost or unreadable is replaced.
		err = store.Replace(ctx, rolledBack)
	}
	if err != nil {
		return 0, fmt.Errorf("writing the rolled back state: %w", err)
	}
	return next, nil
}

// forgottenImports are the import IDs of the resources the live state holds and the
// target state of serial lacks, from the index the controller keeps in the status; it
// refuses resources that index does not know (another serial, or no import brings them
// back), naming them.
func forgottenImports(obj Subject, live *tfstate.Stored, target []byte, serial int64) (map[string]string, error) {
	if live.State == nil {
		return nil, nil
	}
	held, err := imports.Addresses(live.State)
	if err != nil {
		return nil, err
	}
	kept, err := imports.Addresses(target)
	if err != nil {
		return nil, err
	}
	index, err := statusIndex(obj.GetExtensionStatus().State)
	if err != nil {
		return nil, err
	}
	if index != nil && index.Lineage != live.Lineage {
		index = nil
	}
	adopt := map[string]string{}
	var unknown []string
	for _, address := range slices.Sorted(maps.Keys(held)) {
		if kept[address] {
			continue
		}
		if index != nil {
			if id, ok := index.IDs[address]; ok {
				adopt[address] = id
				continue
			}
		}
		unknown = append(unknown, address)
	}
	if len(unknown) > 0 {
		known := "no index"
		if index != nil {
			known = fmt.Sprintf("its index (serial %d)", index.Serial)
		}
		return nil, fmt.Errorf("%w: the live state (serial %d) holds %d resources that serial %d lacks and whose import IDs %s does not know: %s. "+
			"The next apply would create them a second time; nothing is written. Apply once so that the index holds them, or remove them first",
			ErrRollbackWouldForget, live.Serial, len(unknown), serial, known, strings.Join(unknown, ", "))
	}
	return adopt, nil
}

// rebound refuses a target state of serial that holds an address the live state holds
// under another ID. The rollback is refused rather than the live object imported back:
// that would write a state that is neither the live one nor the one asked for, and
// forget the older object where it still exists (a replace whose destroy failed, or
// one made outside terraform); which of the two objects the address is to hold is the
// operator's call, and a refusal writes nothing.
func rebound(live *tfstate.Stored, target []byte, serial int64) error {
	if live.State == nil {
		return nil
	}
	held, err := imports.ObjectIDs(live.State)
	if err != nil {
		return err
	}
	kept, err := imports.ObjectIDs(target)
	if err != nil {
		return err
	}
	var differ []string
	for _, address := range slices.Sorted(maps.Keys(held)) {
		if id, ok := kept[address]; ok && id != held[address] {
			differ = append(differ, fmt.Sprintf("%s (live %q, serial %d %q)", address, held[address], serial, id))
		}
	}
	if len(differ) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the live state (serial %d) holds %d resources under other IDs than serial %d: %s. "+
		"The next apply would lose the live objects; nothing is written. Roll back to a serial that holds them as the live state does, or apply the older configuration instead",
		ErrRollbackWouldRebind, live.Serial, len(differ), serial, strings.Join(differ, ", "))
}

// addImports adds adopt to the object's import annotation, refusing an address the
// annotation names with another ID.
func addImports(ctx context.Context, c client.Client, obj Subject, adopt map[string]string) error {
	if len(adopt) == 0 {
		return nil
	}
	wanted, err := importAnnotation(obj)
	if err != nil {
		return fmt.Errorf("%w; fix it before a rollback adds to it", err)
	}
	if wanted == nil {
		wanted = map[string]string{}
	}
	for _, address := range slices.Sorted(maps.Keys(adopt)) {
		if id, ok := wanted[address]; ok && id != adopt[address] {
			return fmt.Errorf("metadata.annotations[%s]: %s is imported from %q, the live state holds it as %q; nothing is written", AnnotationImport, address, id, adopt[address])
		}
		wanted[address] = adopt[address]
	}
	raw, err := json.Marshal(wanted)
	if err != nil {
		return err
	}
	base := obj.DeepCopyObject().(client.Object)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationImport] = string(raw)
	obj.SetAnnotations(annotations)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("annotating the object with the imports of what the live state holds: %w; nothing is rolled back", err)
	}
	return nil
}

// withSerial is state with its serial set, everything else as it was, byte for byte: a
// decode and encode of the whole state would cost many times its size, and indenting its
// values again the square of how deep they nest.
func withSerial(state []byte, serial int64) ([]byte, error) {
	var object map[string]anyValue
	if err := json.Unmarshal(state, &object); err != nil || object == nil {
		return nil, fmt.Errorf("%w: %v", tfstate.ErrInvalid, cmp.Or(err, errors.New("null")))
	}
	value := strconv.FormatInt(serial, 10)
	var spans [][2]int
	top := gjson.ParseBytes(state)
	top.ForEach(func(key, v gjson.Result) bool {
		if key.Str == "serial" {
			spans = append(spans, [2]int{v.Index, v.Index + len(v.Raw)})
		}
		return true
	})
	if len(spans) == 0 {
		// A state without a serial gets one first.
		open := top.Index + 1
		rest := bytes.TrimLeft(state[open:], " \t\r\n")
		separator := ","
		if rest[0] == '}' {
			separator = ""
		}
		return slices.Concat(state[:open], []byte(`"serial":`+value+separator), state[open:]), nil
	}
	out := make([]byte, 0, len(state)+len(spans)*len(value))
	last := 0
	for _, span := range spans {
		out = append(append(out, state[last:span[0]]...), value...)
		last = span[1]
	}
	return append(out, state[last:]...), nil
}

// anyValue is a JSON value checked, never kept.
type anyValue struct{}

func (*anyValue) UnmarshalJSON([]byte) error { return nil }

func serials(entries []tfstate.HistoryEntry) string {
	if len(entries) == 0 {
		return "none"
	}
	s := ""
	for i, e := range entries {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatInt(e.Serial, 10)
	}
	return s
}
