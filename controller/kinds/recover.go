package kinds

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/imports"
	"github.com/terraseed/terraseed/terraform/run"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// ConditionStateRecovered says that a lost state was found again, from where, and what
// could not be.
const ConditionStateRecovered extensionsv1alpha1.ConditionType = "StateRecovered"

// Reasons of the StateRecovered condition.
const (
	// reasonRecovering: the recovered state is written and the apply that imports the
	// rest is under way.
	reasonRecovering = "Recovering"
	reasonRecovered  = "Recovered"
)

// recovery is what an apply does about a lost state: the state it starts from and the
// resources it imports.
type recovery struct {
	// imports are the import IDs of the indexed resources the recovered state lacks, by address.
	imports map[string]string
	// unimportable are the indexed resources the recovered state lacks that no import
	// brings back.
	unimportable []string
	// cause says how the state was lost (see lostStateCause).
	cause   string
	message string
}

// recoverState finds a lost state again before an apply: when the stored state is
// missing, empty, unreadable or older than its index says, while the history or an
// index knows resources, the newest readable state of the history (of the index's
// lineage) replaces it, and every indexed resource that state lacks is imported by the
// apply, so that nothing is created twice. nil when the state is not lost.
func (op *operation) recoverState(ctx context.Context, files map[string]string) (*recovery, error) {
	r, err := op.findLostState(ctx, declaredResources(files))
	if r == nil || err != nil {
		return nil, err
	}
	return r, op.recovering(ctx, r.message)
}

// findLostState is recoverState without saying so in the status: the stored state
// replaced by the history's when that holds more, and the indexed resources declared
// that no state holds.
func (op *operation) findLostState(ctx context.Context, declared func(address string) bool) (*recovery, error) {
	objects := op.objects()
	store := objects.Store(op.actuator.Client)
	stored, err := store.Inspect(ctx)
	if err != nil {
		return nil, op.stateNotReadNow(err)
	}
	// The index trusted is the one this controller wrote into the status; the one kept
	// with the state is written by the runs, and is not read.
	index, err := statusIndex(op.status().State)
	if err != nil {
		return nil, extension.InvalidInput(ReasonInvalidConfiguration, "%w", err)
	}
	cause := lostStateCause(stored, index)
	// A first apply finds no state and knows nothing: no history to ask.
	if cause == "" || index.Empty() && op.req.FirstRun {
		return nil, nil
	}
	lineage := ""
	if index != nil {
		lineage = index.Lineage
	}
	history, err := objects.ReadHistory(ctx, op.actuator.Client)
	if err != nil {
		return nil, err
	}
	recovered, from, err := newestReadable(history, lineage)
	if err != nil {
		return nil, op.stateNotReadNow(err)
	}
	if index.Empty() && recovered == nil {
		return nil, nil
	}
	// A stale state that is still newer than the history's stays: it lacks less.
	kept := "history serial " + strconv.FormatInt(from.Serial, 10)
	replace := false
	if stored.State != nil && (recovered == nil || stored.Serial > from.Serial) && (lineage == "" || stored.Lineage == lineage) {
		recovered, kept = stored.State, "the stored serial "+strconv.FormatInt(stored.Serial, 10)
	} else {
		replace = recovered != nil || stored.Exists
	}
	held, err := imports.Addresses(recovered)
	if err != nil {
		return nil, err
	}
	if err := op.refuseUndeclared(index, held, declared, cause); err != nil {
		return nil, err
	}
	if replace {
		if err := store.Replace(ctx, recovered); err != nil {
			return nil, fmt.Errorf("writing the recovered state: %w", err)
		}
	}
	imports, lost := indexedImports(index, held, declared)
	r := &recovery{imports: imports, unimportable: lost, cause: cause}
	var b strings.Builder
	fmt.Fprintf(&b, "the state in %s %s %s: ", objects.Storage.Kind(), objects.StateName(), cause)
	if recovered != nil {
		fmt.Fprintf(&b, "%d from %s, ", len(held), kept)
	}
	fmt.Fprintf(&b, "%d imported", len(r.imports))
	if len(lost) > 0 {
		fmt.Fprintf(&b, "; cannot be imported and are created again: %s", strings.Join(lost, ", "))
	}
	r.message = b.String()
	ctrl.LoggerFrom(ctx).Info("stateRecovering", "cause", cause, "fromHistorySerial", from.Serial, "resources", len(held), "imports", len(r.imports), "unimportable", len(lost))
	return r, nil
}

// stateNotReadNow is the error of an operation that found its stored state unreadable now
// rather than lost: nothing replaces it, nothing is written. A state over the bound waits
// for the operator to raise it; one whose parts or object the API server did not give is
// retried.
func (op *operation) stateNotReadNow(err error) error {
	objects := op.objects()
	err = fmt.Errorf("the state in %s %s is not taken for lost, and nothing replaces it: %w", objects.Storage.Kind(), objects.StateName(), err)
	if errors.Is(err, tfstate.ErrOverBound) {
		return &extension.Error{
			Reason: reasonStateTooLarge, Terminal: true,
			Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
			Err:   fmt.Errorf("%w; raise the controller's memory limit or --max-state-size (chart value maxStateSize)", err),
		}
	}
	return &extension.Error{
		Reason: reasonStateUnreadable,
		Codes:  []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorRetryableInfraDependencies},
		Err:    err,
	}
}

// lostStateCause says how the stored state was lost: missing, invalid, empty or older
// than its index says; empty when it was not. A state that cannot be read now is not
// lost (see stateNotReadNow).
func lostStateCause(stored *tfstate.Stored, index *imports.Index) string {
	switch {
	case !stored.Exists:
		return "was missing"
	case stored.Unreadable != nil:
		return "was unreadable"
	case stored.State == nil:
		return "was empty"
	case index != nil && stored.Lineage == index.Lineage && stored.Serial < index.Serial:
		return fmt.Sprintf("held serial %d, older than serial %d its index names", stored.Serial, index.Serial)
	default:
		return ""
	}
}

// newestReadable is the newest state of the lineage the history holds that can be read.
// A corrupt entry is passed over; one over the bound is not, and is an error: an older
// entry would forget what it holds.
func newestReadable(history *tfstate.History, lineage string) ([]byte, tfstate.HistoryEntry, error) {
	for _, entry := range history.Lineage(lineage) {
		state, err := history.State(entry)
		if err == nil {
			return state, entry, nil
		}
		if errors.Is(err, tfstate.ErrOverBound) {
			return nil, tfstate.HistoryEntry{}, fmt.Errorf("the state history: %w", err)
		}
	}
	return nil, tfstate.HistoryEntry{}, nil
}

// AnnotationLostRemoved confirms that resources a lost state's index names, which the
// configuration no longer declares, were removed by hand: a comma-separated list of their
// addresses, as the refusal names them. The apply that succeeds next removes it.
const AnnotationLostRemoved = run.LabelPrefix + "lost-resources-removed"

// refuseUndeclared stops a recovery before it writes anything when the index names
// resources that the recovered state lacks and the configuration no longer declares
// (a zone removed while the state was lost): terraform can import only what the
// configuration declares, so an apply would neither import nor destroy them, and they
// would stay behind, in no state and no index. Those the operator confirmed removed
// (AnnotationLostRemoved) are let go.
func (op *operation) refuseUndeclared(index *imports.Index, held map[string]bool, declared func(string) bool, cause string) error {
	if index == nil {
		return nil
	}
	removed := confirmedRemoved(op.obj)
	var undeclared []string
	for _, address := range append(slices.Sorted(maps.Keys(index.IDs)), index.Unimportable...) {
		if !held[address] && !declared(address) && !removed[address] {
			undeclared = append(undeclared, address)
		}
	}
	if len(undeclared) == 0 {
		return nil
	}
	slices.Sort(undeclared)
	objects := op.objects()
	// Not terminal: with the state restored from a backup, or the removal confirmed, a
	// retry goes on by itself.
	return &extension.Error{
		Reason: reasonStateLost,
		Err: fmt.Errorf("the state in %s %s %s, and %d resources its index names are in no state of its history and no longer declared by the configuration: %s. "+
			"An apply can neither import nor destroy them, so they would be left behind; nothing is written: restore the state from a backup, "+
			"or remove them by hand and confirm with the annotation %s=%q",
			objects.Storage.Kind(), objects.StateName(), cause, len(undeclared), strings.Join(undeclared, ", "), AnnotationLostRemoved, confirmation(op.obj, undeclared)),
	}
}

// confirmedRemoved are the addresses AnnotationLostRemoved confirms removed by hand.
func confirmedRemoved(obj client.Object) map[string]bool {
	removed := map[string]bool{}
	for _, address := range strings.Split(obj.GetAnnotations()[AnnotationLostRemoved], ",") {
		removed[strings.TrimSpace(address)] = true
	}
	return removed
}

// confirmation is the value of AnnotationLostRemoved that confirms addresses removed and
// keeps what it confirms already: the two refusals ask for it in turn, and a value that
// confirmed only the newest would bring the other refusal back, forever.
func confirmation(obj client.Object, addresses []string) string {
	all := slices.Clone(addresses)
	for address := range confirmedRemoved(obj) {
		if address != "" {
			all = append(all, address)
		}
	}
	slices.Sort(all)
	return strings.Join(slices.Compact(all), ",")
}

// refuseInterrupted stops a run before it starts where a failed run left creates under way
// (terraform killed while the provider made them) that no state holds and that this run
// would not find again: an apply whose configuration no longer declares them, or a
// destroy. The provider may have made them, and they would be left behind. Those the
// operator confirmed removed (AnnotationLostRemoved) are let go.
func (op *operation) refuseInterrupted(ctx context.Context, declared func(string) bool) error {
	interrupted := statusInterrupted(op.status().State)
	if len(interrupted) == 0 {
		return nil
	}
	stored, err := op.objects().Store(op.actuator.Client).Inspect(ctx)
	if err != nil {
		return op.stateNotReadNow(err)
	}
	held, err := imports.Addresses(stored.State)
	if err != nil {
		return err
	}
	removed := confirmedRemoved(op.obj)
	var left []string
	for _, address := range interrupted {
		if !held[address] && !declared(address) && !removed[address] {
			left = append(left, address)
		}
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	return &extension.Error{
		Reason: reasonCreateInterrupted,
		Err: fmt.Errorf("a run ended while terraform created %d resources that no state holds and this run would not find again: %s. "+
			"The provider may have made them, and they would be left behind; nothing is run: remove them by hand where they exist and confirm with the annotation %s=%q",
			len(left), strings.Join(left, ", "), AnnotationLostRemoved, confirmation(op.obj, left)),
	}
}

// reasonCreateInterrupted stops a run that would leave behind what an interrupted create
// may have made.
const reasonCreateInterrupted = "CreateInterrupted"

// indexedImports are the import IDs of the indexed resources a recovered state lacks that
// the configuration declares, and those of them that cannot be imported.
func indexedImports(index *imports.Index, held map[string]bool, declared func(string) bool) (map[string]string, []string) {
	imports := map[string]string{}
	var lost []string
	if index == nil {
		return imports, nil
	}
	for _, address := range slices.Sorted(maps.Keys(index.IDs)) {
		if !held[address] && declared(address) {
			imports[address] = index.IDs[address]
		}
	}
	for _, address := range index.Unimportable {
		if !held[address] && declared(address) {
			lost = append(lost, address)
		}
	}
	return imports, lost
}

// recovering says in the StateRecovered condition that a recovery is under way.
func (op *operation) recovering(ctx context.Context, message string) error {
	now := metav1.Now()
	extension.SetCondition(op.status(), extensionsv1alpha1.Condition{
		Type: ConditionStateRecovered, Status: extensionsv1alpha1.ConditionFalse, Reason: reasonRecovering,
		Message: message, LastUpdateTime: now, LastTransitionTime: now,
	})
	// The condition must outlive this reconcile: the apply ends in another.
	return op.req.PatchStatus(ctx)
}

// recovered marks a recovery done once its apply succeeded, and says so in an event. It
// reports whether the apply ended a recovery.
func (op *operation) recovered() bool {
	c := extension.FindCondition(op.status(), ConditionStateRecovered)
	if c == nil || c.Reason != reasonRecovering {
		return false
	}
	now := metav1.Now()
	extension.SetCondition(op.status(), extensionsv1alpha1.Condition{
		Type: ConditionStateRecovered, Status: extensionsv1alpha1.ConditionTrue, Reason: reasonRecovered,
		Message: c.Message, LastUpdateTime: now, LastTransitionTime: now,
	})
	if op.actuator.Recorder != nil {
		op.actuator.Recorder.Eventf(op.obj, nil, corev1.EventTypeNormal, reasonRecovered, "Reconcile", "%s", c.Message)
	}
	return true
}

// resourceBlock finds the resources a rendered configuration declares in its root module.
var resourceBlock = regexp.MustCompile(`(?m)^\s*resource\s+"([A-Za-z0-9_-]+)"\s+"([A-Za-z0-9_-]+)"`)

// declaredResources says whether an address is of a resource the configuration declares:
// an indexed resource it dropped is not imported (terraform refuses an import without
// configuration) but destroyed by nobody, as any resource a configuration drops whose
// state is lost. Resources in modules are taken as declared.
func declaredResources(files map[string]string) func(address string) bool {
	declared := map[string]bool{}
	for name, content := range files {
		if strings.HasSuffix(name, ".tf") {
			for _, m := range resourceBlock.FindAllStringSubmatch(content, -1) {
				declared[m[1]+"."+m[2]] = true
			}
		}
	}
	return func(address string) bool {
		if strings.HasPrefix(address, "module.") {
			return true
		}
		resource, _, _ := strings.Cut(address, "[")
		return declared[resource]
	}
}
