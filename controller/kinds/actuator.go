package kinds

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/errorcodes"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

const (
	// Finalizer keeps an Infrastructure until its terraform resources are destroyed.
	Finalizer = "extensions.gardener.cloud/infrastructure"

	secretRefIndex = "spec.secretRef"
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

// UncachedObjects are the kinds the manager's client must read live: a seed holds many
// of them, and caching every one would cost memory in proportion to the seed, not to
// the Infrastructures served.
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Pod{}, &corev1.ServiceAccount{}, &rbacv1.RoleBinding{}, &coordinationv1.Lease{}}
}

// Actuator makes the infrastructure an Infrastructure describes exist with terraform.
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

	// kinds are the kinds served besides the Infrastructure (SetupKinds), whose indexes an
	// adoption must not take from.
	kinds []*kindSpec
}

// Reconciler is the Infrastructure controller: Gardener's protocol around the Actuator.
type Reconciler = extension.Reconciler[*extensionsv1alpha1.Infrastructure]

// NewReconciler serves the given provider types and extension classes (shoot when none)
// with the actuator.
func NewReconciler(a *Actuator, types []string, classes []extensionsv1alpha1.ExtensionClass) *Reconciler {
	return newReconciler[*extensionsv1alpha1.Infrastructure](a, a, infrastructureKind, types, classes)
}

func newReconciler[T Subject](a *Actuator, actuator extension.Actuator[T], kind *kindSpec, types []string, classes []extensionsv1alpha1.ExtensionClass) *extension.Reconciler[T] {
	return &extension.Reconciler[T]{
		Kind:      kind.name,
		Finalizer: kind.finalizer,
		Client:    a.Client,
		APIReader: a.APIReader,
		Recorder:  a.Recorder,
		Actuator:  actuator,
		NewObject: func() T { return kind.newObject().(T) },
		Types:     types,
		Classes:   classes,
	}
}

// SetupWithManager registers the reconciler; besides the Infrastructures, a change of a
// referenced secret reconciles the ones using it, and so does the end of a run, which
// runEnds tells (executor.Pipeline.Ends), and the deletion of a state object by someone
// else (keepDeletedState).
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, r *Reconciler, runEnds source.Source, options controller.Options) error {
	return setupWithManager(ctx, mgr, r, infrastructureKind, runEnds, options)
}

func setupWithManager[T Subject](ctx context.Context, mgr ctrl.Manager, r *extension.Reconciler[T], kind *kindSpec, runEnds source.Source, options controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, kind.newObject(), secretRefIndex, indexSecretRef); err != nil {
		return fmt.Errorf("indexing %ss by secret: %w", kind.name, err)
	}
	return r.SetupWithManager(ctx, mgr, options, func(b *builder.Builder) *builder.Builder {
		b = b.WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, secret client.Object) []reconcile.Request {
			return usingSecret(ctx, r, kind, secret)
		})).WatchesRawSource(runEnds)
		return watchDeletedStates(b, kind)
	})
}

func secretKeyOf(obj Subject) client.ObjectKey {
	ref := obj.GetSecretRef()
	if ref.Namespace == "" {
		return client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}
	}
	return client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
}

func indexSecretRef(obj client.Object) []string {
	return []string{secretKeyOf(obj.(Subject)).String()}
}

// usingSecret are the served objects of kind whose spec.secretRef names secret.
func usingSecret[T Subject](ctx context.Context, r *extension.Reconciler[T], kind *kindSpec, secret client.Object) []reconcile.Request {
	list := kind.newList()
	if err := r.Client.List(ctx, list, client.MatchingFields{secretRefIndex: client.ObjectKeyFromObject(secret).String()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listingObjectsForSecret", "kind", kind.name, "secret", client.ObjectKeyFromObject(secret))
		return nil
	}
	var requests []reconcile.Request
	for _, obj := range listItems(list) {
		if r.Serves(obj) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
	}
	return requests
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
