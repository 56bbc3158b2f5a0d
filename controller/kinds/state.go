package kinds

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// migratedState is the shape of .status.state: the terraform state, gzipped, so that it
// comes back byte for byte and stays small in the Infrastructure.
type migratedState struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// TerraformState is the gzipped state file; encoding/json writes it as base64.
	TerraformState []byte `json:"terraformState"`
	// Index names every resource of the state and its import ID, so that they are found
	// again where the state is lost, or too large for the status.
	Index *imports.Index `json:"index,omitempty"`
	// Interrupted are the resources whose create a failed run left under way and no
	// state holds: the provider may have made them. Kept until an apply succeeds.
	Interrupted []string `json:"interrupted,omitempty"`
}

const (
	migratedStateAPIVersion = run.Domain + "/v1alpha1"
	migratedStateKind       = "InfrastructureState"
)

// maxStatusState bounds the encoded state in .status.state, leaving room in the
// Infrastructure for everything else under etcd's limit of 1.5 MiB a request.
const maxStatusState = 1024 * 1024

// keepStateInStatus puts the state of a successful apply into .status.state, where
// gardenlet's periodic backup of the shoot's state finds it should the seed be lost. A
// state too large for the status is left out, so that no stale one stays, and an event
// says so. A state kept in Secrets stays there: whoever reads Infrastructures must not
// read it; only a migrate, whose state must travel to the next seed, puts it there. The
// index, which holds resource IDs only, is kept in either case.
func (op *operation) keepStateInStatus(state []byte, index *imports.Index) error {
	if len(state) == 0 {
		op.status().State = nil
		recordStateSize(op.kind, op.obj, 0)
		return nil
	}
	if op.actuator.State.Storage == tfstate.StorageSecret {
		recordStateSize(op.kind, op.obj, 0)
		return op.keepIndex(index)
	}
	encoded, err := encodeState(state, index)
	var tooLarge *stateTooLargeError
	if errors.As(err, &tooLarge) {
		recordStateSize(op.kind, op.obj, tooLarge.size)
		if op.status().State != nil || op.req.FirstRun {
			op.actuator.Recorder.Eventf(op.obj, nil, corev1.EventTypeWarning, reasonStateTooLarge, "KeepState",
				"The %s: it is kept in %s %s only", err, op.objects().Storage.Kind(), op.objects().StateName())
		}
		// The index, far smaller, still finds every resource again should the state be lost.
		return op.keepIndex(index)
	}
	if err != nil {
		return err
	}
	op.status().State = encoded
	recordStateSize(op.kind, op.obj, len(encoded.Raw))
	return nil
}

// keepIndex puts index alone into .status.state. An index too large even for that keeps
// the index the status held (without a state, so that no stale one stays): a recovery
// trusts no index but that one, and none at all would forget every resource. It fails
// loudly, with an event and an error naming the size and the bound: the status no longer
// finds again what the state holds beyond that index.
func (op *operation) keepIndex(index *imports.Index) error {
	encoded, err := encodeState(nil, index)
	var tooLarge *stateTooLargeError
	if errors.As(err, &tooLarge) {
		prior, _ := statusIndex(op.status().State)
		op.status().State, _ = encodeState(nil, prior)
		err = &indexTooLargeError{size: tooLarge.size, kept: prior}
		op.actuator.Recorder.Eventf(op.obj, nil, corev1.EventTypeWarning, reasonStateTooLarge, "KeepState", "%s", err)
		return err
	}
	if err != nil {
		return err
	}
	op.status().State = encoded
	return nil
}

// indexTooLargeError is an index that does not fit the status.
type indexTooLargeError struct {
	size int
	kept *imports.Index
}

func (e *indexTooLargeError) Error() string {
	kept := "no index is kept"
	if e.kept != nil {
		kept = fmt.Sprintf("the index of serial %d is kept", e.kept.Serial)
	}
	return fmt.Sprintf("status.state: the index of the terraform state takes %d bytes, more than the %d .status.state can hold; %s", e.size, maxStatusState, kept)
}

// keepHistory keeps the state of a successful apply in the history: at most one write per
// apply, none for most. An apply that changed nothing (the state the status held already)
// reads the history and writes it only when it lacks that state (the history object was
// deleted, or never written on this seed: after a restore, a recovery, a state the run
// kept itself and wrote back), so that the next loss of the state finds it there rather
// than only the import path. A history that cannot be written fails nothing.
func (op *operation) keepHistory(ctx context.Context, state []byte) {
	depth := op.actuator.State.History()
	if depth == 0 || len(state) == 0 {
		return
	}
	if _, err := op.objects().AppendHistory(ctx, op.actuator.Client, state, depth, metav1.Now()); err != nil {
		ctrl.LoggerFrom(ctx).Info("stateHistoryNotWritten", "reason", err.Error())
	}
}

// keepFailedState keeps the state an apply that failed left: what it created is in no
// index yet (the status's is written by a successful apply, and the one a run writes is
// not trusted). It goes into the history and, where it knows everything the status's index
// does, into .status.state with its index, so that a recovery finds it again should the
// state be lost (with its history) before an apply succeeds, rather than create it a
// second time. The state is read as any is, within the bound; one that cannot be read, or
// a history that cannot be written, fails nothing.
func (op *operation) keepFailedState(ctx context.Context, err error) {
	var pending *runPendingError
	if errors.As(err, &pending) {
		return
	}
	objects := op.objects()
	stored, readErr := objects.Store(op.actuator.Client).Inspect(ctx)
	if readErr != nil {
		return
	}
	if stored.State != nil {
		op.indexFailedState(ctx, stored.State)
	}
	var runErr *run.Error
	if errors.As(err, &runErr) && len(runErr.Interrupted) > 0 {
		op.recordInterrupted(ctx, stored.State, runErr.Interrupted)
	}
	if depth := op.actuator.State.History(); depth > 0 && stored.State != nil {
		if _, err := objects.AppendHistory(ctx, op.actuator.Client, stored.State, depth, metav1.Now()); err != nil {
			ctrl.LoggerFrom(ctx).Info("stateHistoryNotWritten", "reason", err.Error())
		}
	}
}

// indexFailedState puts the state a failed apply left into .status.state when it is a
// later state of the same lineage that holds every resource the status's index names. One
// that lacks some (a recovery cut short, a replace half done) is not: the index must never
// forget what a state held, and the history keeps that state all the same.
func (op *operation) indexFailedState(ctx context.Context, state []byte) {
	index := op.indexOf(state)
	prior, err := statusIndex(op.status().State)
	if index == nil || err != nil {
		return
	}
	if prior != nil {
		if prior.Lineage != index.Lineage || prior.Serial >= index.Serial {
			return
		}
		for address := range prior.IDs {
			if _, ok := index.IDs[address]; !ok {
				return
			}
		}
		for _, address := range prior.Unimportable {
			if !slices.Contains(index.Unimportable, address) {
				return
			}
		}
	}
	if err := op.keepStateInStatus(state, index); err != nil {
		ctrl.LoggerFrom(ctx).Info("failedStateNotIndexed", "reason", err.Error())
	}
}

// recordInterrupted keeps in .status.state, beside the index, the creates a failed run
// left under way that state does not hold, with those kept before.
func (op *operation) recordInterrupted(ctx context.Context, state []byte, interrupted []string) {
	held, err := imports.Addresses(state)
	if err != nil {
		return
	}
	kept, ok := statusKept(op.status().State)
	if !ok && op.status().State != nil && len(op.status().State.Raw) > 0 {
		// What the status holds is not overwritten: it may be a state or an index of
		// another writer that a restore or a recovery needs.
		op.interruptedNotKept(ctx, interrupted, "status.state is not the InfrastructureState this controller writes")
		return
	}
	if !ok {
		kept = migratedState{APIVersion: migratedStateAPIVersion, Kind: migratedStateKind}
	}
	for _, address := range interrupted {
		if !held[address] && !slices.Contains(kept.Interrupted, address) {
			kept.Interrupted = append(kept.Interrupted, address)
		}
	}
	encoded, err := json.Marshal(kept)
	if err != nil {
		op.interruptedNotKept(ctx, interrupted, err.Error())
		return
	}
	if len(encoded) > maxStatusState {
		op.interruptedNotKept(ctx, interrupted, fmt.Sprintf("with them status.state takes %d bytes, more than the %d it can hold", len(encoded), maxStatusState))
		return
	}
	op.status().State = &runtime.RawExtension{Raw: encoded}
}

// interruptedNotKept says, in an event on the object and the log, that the interrupted
// creates of a failed run are in no status: the run's error named them, nothing else will.
func (op *operation) interruptedNotKept(ctx context.Context, interrupted []string, why string) {
	ctrl.LoggerFrom(ctx).Info("interruptedCreatesNotKept", "resources", len(interrupted), "reason", why)
	op.actuator.Recorder.Eventf(op.obj, nil, corev1.EventTypeWarning, reasonInterruptedNotKept, "KeepInterrupted",
		"The creates a failed run left under way (%s) are not kept in the status of %s: %s; nothing is overwritten",
		strings.Join(interrupted, ", "), client.ObjectKeyFromObject(op.obj), why)
}

// reasonInterruptedNotKept is the event of interrupted creates the status cannot keep.
const reasonInterruptedNotKept = "InterruptedCreatesNotKept"

// statusInterrupted are the interrupted creates .status.state keeps.
func statusInterrupted(raw *runtime.RawExtension) []string {
	kept, _ := statusKept(raw)
	return kept.Interrupted
}

// statusKept is what .status.state keeps, when it holds what this controller writes there.
func statusKept(raw *runtime.RawExtension) (migratedState, bool) {
	var kept migratedState
	if raw == nil || len(raw.Raw) == 0 || len(raw.Raw) > maxStatusState || json.Unmarshal(raw.Raw, &kept) != nil || kept.Kind != migratedStateKind {
		return migratedState{}, false
	}
	return kept, true
}

// indexOf indexes state with the import IDs of the Infrastructure's provider; nil when
// either is unknown, so that an unindexed state never blocks what keeps it.
func (op *operation) indexOf(state []byte) *imports.Index {
	provider, err := op.served()
	if err != nil || len(state) == 0 {
		return nil
	}
	index, err := provider.ImportIDs().Index(state)
	if err != nil {
		return nil
	}
	return index
}

// encodeState is .status.state for a terraform state and its index, or a
// stateTooLargeError; nil without either. Without a state it holds the index alone.
func encodeState(state []byte, index *imports.Index) (*runtime.RawExtension, error) {
	kept := migratedState{APIVersion: migratedStateAPIVersion, Kind: migratedStateKind, Index: index}
	if len(state) > 0 {
		compressed, err := tfstate.Gzip(state, gzip.DefaultCompression)
		if err != nil {
			return nil, err
		}
		kept.TerraformState = compressed
	} else if index == nil {
		return nil, nil
	}
	raw, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	if len(raw) > maxStatusState {
		return nil, &stateTooLargeError{size: len(raw)}
	}
	return &runtime.RawExtension{Raw: raw}, nil
}

// stateTooLargeError is a state that does not fit the status even compressed.
type stateTooLargeError struct{ size int }

func (e *stateTooLargeError) Error() string {
	return fmt.Sprintf("compressed terraform state takes %d bytes, more than the %d .status.state can hold", e.size, maxStatusState)
}

// readRestored is the state of .status.state a restore writes back.
func (op *operation) readRestored(_ context.Context, s *applyScope) error {
	if !s.restore {
		return nil
	}
	var err error
	s.restored, err = decodeState(op.status().State, op.actuator.State.MaxSize)
	return err
}

// restoreState writes the state a restore read into the state object, unless that holds
// a newer snapshot of the same state (a retried restore whose apply wrote it). A state of
// another lineage is refused: it is another infrastructure's state, and which of the two
// is right is the operator's call.
func (op *operation) restoreState(ctx context.Context, s *applyScope) error {
	if s.restored == nil {
		return nil
	}
	_, err := op.objects().RestoreState(ctx, op.actuator.Client, s.restored)
	if errors.Is(err, tfstate.ErrLineageMismatch) || errors.Is(err, tfstate.ErrInvalid) {
		return extension.InvalidInput(ReasonInvalidConfiguration, "status.state: %w", err)
	}
	if err != nil {
		return fmt.Errorf("writing the restored state: %w", err)
	}
	return nil
}

// decodeState returns the terraform state kept in .status.state, nil when there is none,
// decoded to at most maxSize bytes (0: the most a state may take).
func decodeState(raw *runtime.RawExtension, maxSize int) ([]byte, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	invalid := func(err error) error {
		return extension.InvalidInput(ReasonInvalidConfiguration, "status.state: %w", err)
	}
	var kept migratedState
	if err := json.Unmarshal(raw.Raw, &kept); err != nil {
		return nil, invalid(err)
	}
	if kept.Kind != migratedStateKind || kept.APIVersion != migratedStateAPIVersion {
		return nil, invalid(fmt.Errorf("want apiVersion %s, kind %s; got %q, %q", migratedStateAPIVersion, migratedStateKind, kept.APIVersion, kept.Kind))
	}
	if len(kept.TerraformState) == 0 {
		return nil, nil
	}
	state, err := tfstate.GunzipAtMost(bytes.NewReader(kept.TerraformState), maxSize)
	if err != nil {
		return nil, invalid(fmt.Errorf("terraformState: %w", err))
	}
	return state, nil
}

// maxIndexEntries bounds the resources an index of .status.state is read with: far more
// than a state under the bound holds (a resource instance takes hundreds of bytes of
// state), so that only an index written by another hand reaches it, and is refused.
const maxIndexEntries = 100_000

// statusIndex is the index kept in .status.state, the one a recovery trusts: the
// controller wrote it, from a state it decoded under its bound. nil when there is none or
// the status holds none; an index larger than the controller writes is refused rather
// than read in part, naming the figure.
func statusIndex(raw *runtime.RawExtension) (*imports.Index, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	// The status holds at most what keepStateInStatus puts there; one larger was not
	// written by this controller, and is not decoded.
	if len(raw.Raw) > maxStatusState {
		return nil, fmt.Errorf("status.state: %d bytes, more than the %d this controller writes there; its index is not read", len(raw.Raw), maxStatusState)
	}
	var kept migratedState
	if json.Unmarshal(raw.Raw, &kept) != nil || kept.Kind != migratedStateKind {
		return nil, nil
	}
	if kept.Index == nil {
		return nil, nil
	}
	if n := len(kept.Index.IDs) + len(kept.Index.Unimportable); n > maxIndexEntries {
		return nil, fmt.Errorf("status.state.index: %d resources, more than the %d an index is read with", n, maxIndexEntries)
	}
	return kept.Index, nil
}
