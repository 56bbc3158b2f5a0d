package kinds

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// Reasons of the Ready condition; each failure carries one.
const (
	ReasonInvalidConfiguration   = extension.ReasonInvalid
	reasonCredentialsUnavailable = "CredentialsUnavailable"
	reasonTerraformFailed        = "TerraformFailed"
	reasonRunInProgress          = "RunInProgress"
	reasonStateTooLarge          = "StateTooLarge"
	// reasonStateUnreadable: the stored state cannot be read now (a part missing, the API
	// server not answering); it is not lost, and the operation is retried.
	reasonStateUnreadable = "StateUnreadable"
	// reasonStateLost stops a deletion whose state lost resources that no history holds.
	reasonStateLost = "StateLost"
)

// Actuator makes what an object of a kind served from templates describes exist with
// terraform. Its methods are the Infrastructure's entry points; kindActuator's, on it,
// those of every other kind.
type Actuator struct {
	Client client.Client
	// APIReader reads Secrets uncached, so that the manager never caches every Secret of a seed.
	APIReader client.Reader
	// Metadata reads the metadata of run objects from the manager's cache (mgr.GetCache()),
	// which watches them for deleted states: whether a state object is being deleted is
	// looked up there, at no request. Without it, the API server is asked.
	Metadata  client.Reader
	Recorder  events.EventRecorder
	Providers *templates.Registry
	// Runs is the run pipeline the operations submit their runs to (executor.Pipeline).
	Runs Runs
	// DriftInterval is how often an up-to-date Infrastructure is planned, without an
	// apply, to tell in its InfrastructureInSync condition whether it drifted; zero never.
	DriftInterval time.Duration
	// AllowCrossNamespaceSecretRefs lets spec.secretRef name a Secret in another namespace
	// than the Infrastructure's; the operator's choice, off by default, since whoever may
	// write an Infrastructure would otherwise use any credentials of the seed.
	AllowCrossNamespaceSecretRefs bool
	// AllowOperatorOnlyCredentials lets a credentials secret set the keys a provider marks
	// operatorOnly, such as aws's endpoint, which sends every cloud call, and the outputs
	// that flow into Gardener and the control plane, to the URL it names.
	AllowOperatorOnlyCredentials bool
	// Namespace is the controller's own, where the runs of cluster-scoped kinds (a
	// BackupBucket, a BackupEntry) are kept.
	Namespace string
	// State is how the states are kept (--state-storage, --max-state-size,
	// --state-history): a state kept in the other kind of object is moved into
	// State.Storage before the Infrastructure's next run, or when it is found up to date.
	State state.Options

	// kinds are the kinds served besides the Infrastructure (Setup), whose indexes an
	// adoption must not take from.
	kinds []*kindSpec
}

// request is one operation on one object of any kind served.
type request struct {
	Object    Subject
	Cluster   *extensionsv1alpha1.Cluster
	Operation extensionsv1alpha1.LastOperationType
	FirstRun  bool
	// kind is the object's; nil: an Infrastructure.
	kind *kindSpec
	requestActions
}

// requestActions are what an operation asks of the reconciler (extension.Request).
type requestActions interface {
	PatchStatus(ctx context.Context) error
	EnsureFinalizer(ctx context.Context) error
	RemoveAnnotation(ctx context.Context, key string) error
}

func requestOf[T Subject](kind *kindSpec, req extension.Request[T]) request {
	return request{Object: req.Object, Cluster: req.Cluster, Operation: req.Operation, FirstRun: req.FirstRun, kind: kind, requestActions: req}
}

// operation is one operation of the actuator on one object.
type operation struct {
	actuator *Actuator
	req      request
	kind     *kindSpec
	obj      Subject
}

func (a *Actuator) operation(req request) *operation {
	if req.kind == nil {
		req.kind = infrastructureKind
	}
	return &operation{actuator: a, req: req, kind: req.kind, obj: req.Object}
}

func (op *operation) status() *extensionsv1alpha1.DefaultStatus { return op.obj.GetExtensionStatus() }
func (op *operation) spec() *extensionsv1alpha1.DefaultSpec     { return op.obj.GetExtensionSpec() }

// phase is one step of an operation (an apply, a deletion) over the scope S its steps
// share; an error ends the operation, a runPendingError until the operation's run ended.
type phase[S any] func(context.Context, *S) error

func runPhases[S any](ctx context.Context, s *S, phases []phase[S]) error {
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Reconcile applies the infrastructure.
func (a *Actuator) Reconcile(ctx context.Context, req extension.Request[*extensionsv1alpha1.Infrastructure]) error {
	return a.reconcile(ctx, requestOf(infrastructureKind, req))
}

// UpToDate is true when the credentials did not change since the last apply. A state kept
// in the other kind of object than State.Storage is moved first: a controller restarted with
// another --state-storage moves every state without a run.
func (a *Actuator) UpToDate(ctx context.Context, req extension.Request[*extensionsv1alpha1.Infrastructure]) (bool, error) {
	return a.upToDate(ctx, requestOf(infrastructureKind, req))
}

// Delete destroys the infrastructure.
func (a *Actuator) Delete(ctx context.Context, req extension.Request[*extensionsv1alpha1.Infrastructure]) error {
	return a.delete(ctx, requestOf(infrastructureKind, req))
}

// ForceDelete forgets the infrastructure without destroying it.
func (a *Actuator) ForceDelete(ctx context.Context, req extension.Request[*extensionsv1alpha1.Infrastructure]) error {
	return a.forceDelete(ctx, requestOf(infrastructureKind, req))
}

// Migrate keeps the state in .status.state and releases the run objects.
func (a *Actuator) Migrate(ctx context.Context, req extension.Request[*extensionsv1alpha1.Infrastructure]) error {
	return a.migrate(ctx, requestOf(infrastructureKind, req))
}

// Restore writes the state kept in .status.state back, then applies.
func (a *Actuator) Restore(ctx context.Context, req extension.Request[*extensionsv1alpha1.Infrastructure]) error {
	return a.restore(ctx, requestOf(infrastructureKind, req))
}

// Forget drops what the scheduler kept of a run of an Infrastructure that is gone, and
// its metrics.
func (a *Actuator) Forget(key client.ObjectKey) { a.forget(infrastructureKind, key) }

// kindActuator is the Actuator for the objects of a kind its providers serve from
// templates: the same operations as an Infrastructure's, without its extras.
type kindActuator[T Subject] struct {
	actuator *Actuator
	kind     *kindSpec
}

func (k kindActuator[T]) Reconcile(ctx context.Context, req extension.Request[T]) error {
	return k.actuator.reconcile(ctx, requestOf(k.kind, req))
}

func (k kindActuator[T]) UpToDate(ctx context.Context, req extension.Request[T]) (bool, error) {
	return k.actuator.upToDate(ctx, requestOf(k.kind, req))
}

func (k kindActuator[T]) Delete(ctx context.Context, req extension.Request[T]) error {
	return k.actuator.delete(ctx, requestOf(k.kind, req))
}

func (k kindActuator[T]) ForceDelete(ctx context.Context, req extension.Request[T]) error {
	return k.actuator.forceDelete(ctx, requestOf(k.kind, req))
}

func (k kindActuator[T]) Migrate(ctx context.Context, req extension.Request[T]) error {
	return k.actuator.migrate(ctx, requestOf(k.kind, req))
}

func (k kindActuator[T]) Restore(ctx context.Context, req extension.Request[T]) error {
	return k.actuator.restore(ctx, requestOf(k.kind, req))
}

func (k kindActuator[T]) Forget(key client.ObjectKey) { k.actuator.forget(k.kind, key) }

func (a *Actuator) reconcile(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).apply(ctx, &applyScope{}))
}

func (a *Actuator) upToDate(ctx context.Context, req request) (bool, error) {
	op := a.operation(req)
	if err := op.keepDeletedStateBetweenRuns(ctx); err != nil {
		return false, err
	}
	if err := op.moveStateBetweenRuns(ctx); err != nil {
		return false, err
	}
	return op.upToDate(ctx)
}

func (a *Actuator) delete(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).delete(ctx))
}

func (a *Actuator) forceDelete(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).forceDelete(ctx))
}

func (a *Actuator) migrate(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).migrate(ctx))
}

func (a *Actuator) restore(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).restore(ctx))
}

func (a *Actuator) forget(kind *kindSpec, key client.ObjectKey) {
	if kind.objectMetrics {
		forgetMetrics(key)
	}
	if a.Runs != nil {
		a.Runs.ForgetName(kind.runID(a.Namespace, key.Namespace, key.Name, ""))
	}
}

// outcome says in lastOperation what an operation waits for, and classifies its error.
func (a *Actuator) outcome(req request, err error) error {
	describeWaiting(req.Object.GetExtensionStatus(), err)
	return classify(err)
}

// retryAfterRunInProgress is how long a reconcile waits for a run another reconcile
// started; the run writes its outcome itself.
const retryAfterRunInProgress = 10 * time.Second

// classify turns the errors of templates and terraform into the framework's Error.
func classify(err error) error {
	var validationErr *templates.ValidationError
	var runErr *run.Error
	var pending *runPendingError
	switch {
	case err == nil:
		return nil
	case errors.As(err, new(*extension.Error)):
		return err
	case errors.As(err, &pending):
		return &extension.Error{Reason: reasonRunInProgress, RetryAfter: pending.recheck(), Err: err}
	case errors.As(err, &validationErr):
		return &extension.Error{Reason: ReasonInvalidConfiguration, Codes: validationErr.Codes(), Terminal: true, Invalid: true, Err: err}
	case errors.Is(err, run.ErrRunInProgress):
		return &extension.Error{Reason: reasonRunInProgress, RetryAfter: retryAfterRunInProgress, Err: err}
	case errors.Is(err, run.ErrInvalidInput):
		return &extension.Error{Reason: reasonTerraformFailed, Codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}, Terminal: true, Err: err}
	case errors.As(err, &runErr):
		codes := errorcodes.Classify(runErr.Blocks)
		return &extension.Error{Reason: reasonTerraformFailed, Codes: codes, Terminal: !errorcodes.Retryable(codes), Err: err}
	default:
		return err
	}
}
