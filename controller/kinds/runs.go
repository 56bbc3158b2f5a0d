package kinds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/tracing"
)

// pendingRecheck is how soon a reconcile looks again at a run it is waiting for, should
// the run's end not wake it: the end reconciles the object at once.
const pendingRecheck = 2 * time.Minute

// longestPendingRecheck bounds how far apart the looks at a run waiting for a slot may
// fall: they fall as far apart as the run has waited (waitingRecheck).
const longestPendingRecheck = 16 * time.Minute

// runPendingError is a run that has not ended yet: the operation goes on when it does.
type runPendingError struct {
	ticket run.Ticket
	// other is true when the run under way is not the one the operation needs, e.g. a
	// drift plan, or the apply of an earlier configuration.
	other bool
	// stopping is true when the operation asked the run under way to stop.
	stopping bool
}

func (e *runPendingError) Error() string {
	switch {
	case e.stopping && e.ticket.Command == "":
		return "stopping the terraform run an earlier controller process started; its state is saved first"
	case e.stopping:
		return fmt.Sprintf("stopping the terraform %s under way; its state is saved first", e.ticket.Command)
	case e.ticket.Command == "":
		return "waiting for the terraform run an earlier controller process started to end"
	case e.ticket.Phase == run.PhaseWaiting && e.ticket.OverBudget:
		return "waiting for its cloud account's run budget: as many runs of the account in this region as may run at once are under way, or the account pauses after the cloud throttled it"
	case e.ticket.Phase == run.PhaseWaiting && e.ticket.NotStarted != "":
		return fmt.Sprintf("waiting to start again in a moment: %s", e.ticket.NotStarted)
	case e.ticket.Phase == run.PhaseWaiting:
		return fmt.Sprintf("waiting for a run slot (%d ahead)", e.ticket.Ahead)
	case e.other:
		return fmt.Sprintf("waiting for the terraform %s under way to end", e.ticket.Command)
	default:
		return fmt.Sprintf("the terraform %s is under way", e.ticket.Command)
	}
}

// recheck is how soon to look again: a run this controller knows wakes the object when
// it ends; one of an earlier process does not.
func (e *runPendingError) recheck() time.Duration {
	if e.ticket.Command == "" {
		return retryAfterRunInProgress
	}
	if e.ticket.Phase == run.PhaseWaiting && !e.ticket.Submitted.IsZero() {
		return waitingRecheck(time.Since(e.ticket.Submitted))
	}
	return pendingRecheck
}

// waitingRecheck is how soon to look again at a run that has waited for a slot for
// waited: as long again, from pendingRecheck up to longestPendingRecheck. Each look
// renders the configuration and patches the description with the runs ahead; at a fixed
// period, a seed's backlog of N runs would cost each of them looks in proportion to N,
// and the seed looks in proportion to N². Doubling, a wait of W costs about log2(W/2min)
// looks up to W = 16 min, and one every 16 min after.
func waitingRecheck(waited time.Duration) time.Duration {
	return min(max(waited, pendingRecheck), longestPendingRecheck)
}

// Runs is what the operations ask of the run pipeline (executor.Pipeline): submit a run,
// look it up and take its outcome, drop or stop it, and tell a run of an earlier process.
type Runs interface {
	// Submit queues a run; one already known for its ID is refused.
	Submit(ctx context.Context, req run.Request, priority run.Priority) error
	// Lookup returns the ticket of the run of id, false when none is known.
	Lookup(id run.ID) (run.Ticket, bool)
	// Take returns the ticket of the finished run of id with its outcome, and forgets it.
	Take(id run.ID) (run.Ticket, bool)
	// Cancel drops a waiting run or a finished one's outcome; false for a run under way.
	Cancel(id run.ID) bool
	// Stop drops a waiting run or interrupts the one under way; true once none is.
	Stop(ctx context.Context, id run.ID) (bool, error)
	// ForgetName drops what is known of the runs of every owner of the name of id.
	ForgetName(id run.ID)
	// Active says whether a run of id is under way, also one an earlier process started.
	Active(ctx context.Context, id run.ID) (bool, error)
	// Interrupt asks a run of id under way, also one an earlier process started, to stop;
	// false when the executor cannot.
	Interrupt(ctx context.Context, id run.ID) (bool, error)
	// Clean removes what the executor keeps of the runs of id beside the run objects.
	Clean(ctx context.Context, id run.ID) error
}

// RunHooks are what the Infrastructure controller hears of the runs of its pipeline: an
// event on the Infrastructure whose run the cloud throttled, and the failed runs in a row
// of each Infrastructure.
func RunHooks(recorder events.EventRecorder) run.Hooks {
	return run.Hooks{Throttled: throttledEvent(recorder), Ended: countFailures}
}

// runOrWait returns the outcome of req once its run ended. Until then it submits the run,
// after prepare wrote what the run reads, or finds it waiting or under way, and returns a
// runPendingError. A run of another command or configuration known for the object is
// dropped while it waits, waited for while it runs, and its outcome forgotten.
func (op *operation) runOrWait(ctx context.Context, req run.Request, priority run.Priority, prepare func(context.Context) error) (*run.Result, error) {
	runs := op.actuator.Runs
	if runs == nil {
		return nil, errors.New("the actuator has no run pipeline")
	}
	if ticket, known := runs.Lookup(req.ID); known {
		switch {
		case ticket.Of(req) && ticket.Phase == run.PhaseDone:
			_, span := tracing.Start(ctx, "result", attribute.String("terraseed.command", string(req.Command)))
			done, ok := runs.Take(req.ID)
			// The run's spans are in the trace of the reconcile that submitted it.
			span.AddLink(trace.Link{SpanContext: done.Trace})
			tracing.Fail(span, done.Err)
			span.End()
			if ok {
				return done.Result, done.Err
			}
		case ticket.Of(req):
			return nil, &runPendingError{ticket: ticket}
		case ticket.Phase == run.PhaseRunning:
			return nil, &runPendingError{ticket: ticket, other: true}
		}
		// A run of another request that ended: its outcome is no one's now, but what a
		// failed one left (its state, the creates it had under way) is kept.
		if ticket.Phase == run.PhaseDone {
			if done, ok := runs.Take(req.ID); ok && done.Err != nil {
				op.keepFailedState(ctx, done.Err)
			}
		}
		// The run may have started since it was looked up: then it reads what prepare
		// would write, and is waited for.
		if !runs.Cancel(req.ID) {
			ticket, _ := runs.Lookup(req.ID)
			return nil, &runPendingError{ticket: ticket, other: !ticket.Of(req)}
		}
	}
	// A run writes no state object someone deleted: its state is written anew first.
	if err := op.keepDeletedState(ctx); err != nil {
		return nil, err
	}
	// A run reads and writes the state in the kind of object this controller keeps it in.
	if err := op.moveState(ctx); err != nil {
		return nil, err
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			return nil, err
		}
	}
	if err := runs.Submit(ctx, req, priority); err != nil {
		return nil, err
	}
	ticket, _ := runs.Lookup(req.ID)
	return nil, &runPendingError{ticket: ticket}
}

// moveState moves the state into the kind of object this controller keeps states in
// (State.Storage) when the other kind holds it: a change of --state-storage takes effect
// without a run. It returns a runPendingError while a run that may write the state is
// under way, and moves nothing then.
func (op *operation) moveState(ctx context.Context) error {
	store := op.objects().Store(op.actuator.Client)
	pending, err := store.PendingMove(ctx)
	if err != nil || !pending {
		return err
	}
	id := op.objects().ID
	if ticket, known := op.actuator.Runs.Lookup(id); known {
		return &runPendingError{ticket: ticket, other: true}
	}
	if err := op.waitForEarlierRun(ctx, false); err != nil {
		return err
	}
	if _, err := store.Move(ctx); err != nil {
		return fmt.Errorf("moving the state into a %s: %w", op.objects().Storage.Kind(), err)
	}
	ctrl.LoggerFrom(ctx).Info("stateMoved", "from", op.objects().Storage.Other().Kind(), "to", op.objects().Storage.Kind())
	return nil
}

// moveStateBetweenRuns is moveState for an Infrastructure that is up to date: a run under
// way moves nothing, and its end reconciles the Infrastructure again.
func (op *operation) moveStateBetweenRuns(ctx context.Context) error {
	var pending *runPendingError
	if err := op.moveState(ctx); err != nil && !errors.As(err, &pending) {
		return err
	}
	return nil
}

// settle waits for, or drops, any run of the object: one this controller knows, or one an
// earlier process left under way (after a restart or a change of leader).
func (op *operation) settle(ctx context.Context) error {
	id := op.objects().ID
	runs := op.actuator.Runs
	if ticket, known := runs.Lookup(id); known && !runs.Cancel(id) {
		return &runPendingError{ticket: ticket, other: true}
	}
	return op.waitForEarlierRun(ctx, false)
}

// endRuns ends every run of the object but one of the command kept (none when empty) and
// returns a runPendingError until they ended and saved their state, so that the deletion
// that calls it starts from the final state and nothing writes the state afterwards. A
// run waiting for a slot is dropped, and a drift plan under way stopped: neither changes
// anything. An apply under way is stopped when interrupt is set (a forced deletion, which
// destroys nothing), else waited for: an interrupted create may leave a resource its
// provider never reported, which the destroy that follows would not find.
func (op *operation) endRuns(ctx context.Context, kept run.Command, interrupt bool) error {
	id := op.objects().ID
	runs := op.actuator.Runs
	if ticket, known := runs.Lookup(id); known {
		switch {
		case kept != "" && ticket.Command == kept:
			// This process runs it: the operation waits for it as for its own.
			return nil
		case ticket.Phase == run.PhaseRunning && !interrupt && ticket.Command != run.Plan:
			return &runPendingError{ticket: ticket, other: true}
		}
		ended, err := runs.Stop(ctx, id)
		if err != nil {
			return err
		}
		if !ended {
			return &runPendingError{ticket: ticket, other: true, stopping: true}
		}
		runs.Cancel(id)
	}
	return op.waitForEarlierRun(ctx, interrupt)
}

// waitForEarlierRun returns a runPendingError while a run this process does not know is
// under way for the object, asking it to stop first when stop is set.
func (op *operation) waitForEarlierRun(ctx context.Context, stop bool) error {
	id := op.objects().ID
	active, err := op.actuator.Runs.Active(ctx, id)
	if err != nil || !active {
		return err
	}
	if !stop {
		return &runPendingError{other: true}
	}
	asked, err := op.actuator.Runs.Interrupt(ctx, id)
	if err != nil {
		return fmt.Errorf("stopping the run under way: %w", err)
	}
	return &runPendingError{other: true, stopping: asked}
}

// describeWaiting puts what an operation waits for into lastOperation; a run under way
// writes its progress there itself.
func describeWaiting(status *extensionsv1alpha1.DefaultStatus, err error) {
	var pending *runPendingError
	last := status.LastOperation
	if !errors.As(err, &pending) || last == nil || last.State != extensionsv1alpha1.LastOperationStateProcessing {
		return
	}
	if pending.ticket.Phase == run.PhaseRunning && !pending.other {
		return
	}
	last.Description = pending.Error()
	last.LastUpdateTime = metav1.Now()
}

// progressReporter writes a run's progress into the lastOperation of the object while it
// is processing; it patches lastOperation alone, with an optimistic lock, and skips a
// progress another write overtook.
func (a *Actuator) progressReporter(kind *kindSpec, key client.ObjectKey) func(run.Progress) {
	return func(p run.Progress) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		obj := kind.newObject()
		if err := a.Client.Get(ctx, key, obj); err != nil {
			return
		}
		last := obj.GetExtensionStatus().LastOperation
		if last == nil || last.State != extensionsv1alpha1.LastOperationStateProcessing {
			return
		}
		base := obj.DeepCopyObject().(Subject)
		last.Progress = p.Percent()
		last.Description = p.Description()
		last.LastUpdateTime = metav1.Now()
		if err := a.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			ctrl.Log.V(1).Info("progressNotPatched", "kind", kind.name, "object", key, "reason", err.Error())
		}
	}
}

// ReasonThrottled is the reason of an operation that failed because the cloud throttled
// its calls, and of the event that says its account's runs back off.
const ReasonThrottled = "Throttled"

// withFleet sets what the scheduler shares the seed's runs by: the budget key of the
// provider and the run's whole credentials (a keyed digest, never the values: see
// templates.Provider.AccountKey), the shoot project, how the provider's throttling reads,
// the provider's parallelism, and whether the kind's runs are urgent. secret is the Secret whose files the run reads (a
// workload identity's token), nil for the stored credentials of an earlier run, which
// hold no file. The budget is not the project's nor the region's: gardenlet gives every
// shoot's DNSRecords the seed's DNS credentials, and the runs of all of them call one
// account, whose calls the cloud rates (Route 53's across all regions).
func (op *operation) withFleet(req run.Request, provider served, secret *corev1.Secret) run.Request {
	fleet := provider.fleet()
	if fleet.Manifest.Account != nil {
		req.Budget = fleet.AccountKey(req.Env, fileCredentials(provider, secret))
	}
	req.Project = projectOf(op.secretKey().Namespace)
	if !op.kind.clusterScoped {
		req.Project = projectOf(op.obj.GetNamespace())
	}
	req.Parallelism = fleet.Parallelism()
	req.Urgent = op.kind.urgent
	req.Throttled = func(err error) bool { return throttled(fleet, err) }
	return req
}

// fileCredentials are the contents of the credentials of secret that a run reads as
// files, by the name terraform reads each by; none for a nil secret.
func fileCredentials(provider served, secret *corev1.Secret) map[string][]byte {
	if secret == nil {
		return nil
	}
	files := map[string][]byte{}
	for env, key := range provider.CredentialFiles(secret) {
		files[env] = secret.Data[key]
	}
	return files
}

// throttled says whether a run failed because the cloud throttled its calls.
func throttled(provider *templates.Provider, err error) bool {
	var runErr *run.Error
	return errors.As(err, &runErr) && (errorcodes.Throttled(runErr.Blocks) || provider.Throttled(runErr.Blocks))
}

// throttledError is a throttled run's failure with Gardener's rate-limit code, which
// is retried, also where only the provider's own pattern matched it.
func throttledError(provider served, err error) error {
	var runErr *run.Error
	if !throttled(provider.fleet(), err) || !errors.As(err, &runErr) {
		return err
	}
	codes := errorcodes.Classify(runErr.Blocks)
	if !slices.Contains(codes, extensionsv1alpha1.ErrorInfraRateLimitsExceeded) {
		codes = append(codes, extensionsv1alpha1.ErrorInfraRateLimitsExceeded)
	}
	return &extension.Error{Reason: ReasonThrottled, Codes: codes, Terminal: !errorcodes.Retryable(codes), Err: err}
}

// projectOf is the Gardener project of a shoot namespace, shoot--<project>--<name>; any
// other namespace is a project of its own.
func projectOf(namespace string) string {
	rest, ok := strings.CutPrefix(namespace, "shoot--")
	if !ok {
		return namespace
	}
	project, _, ok := strings.Cut(rest, "--")
	if !ok || project == "" {
		return namespace
	}
	return project
}

// throttledEvent tells on the object whose run the cloud throttled that its account's
// runs back off; the account is not named, its key is in the metrics.
func throttledEvent(recorder events.EventRecorder) func(run.ID, run.Backoff) {
	return func(id run.ID, backoff run.Backoff) {
		kind, ok := kindsByPurpose[id.Purpose]
		if recorder == nil || !ok {
			return
		}
		obj := kind.newObject()
		obj.SetName(id.Name)
		obj.SetUID(id.UID)
		if !kind.clusterScoped {
			obj.SetNamespace(id.Namespace)
		}
		obj.GetObjectKind().SetGroupVersionKind(kind.gvk())
		recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonThrottled, "Run",
			"the cloud throttled the calls of this %s's account: its runs in this region now go %d at a time, none starting for %s",
			kind.name, backoff.Slots, backoff.Pause)
	}
}
