package infrastructure

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
	"github.com/terraseed/terraseed/controller/errorcodes"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
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
	// State is how the states are kept (--state-storage, --max-state-size,
	// --state-history): a state kept in the other kind of object is moved into
	// State.Storage before the Infrastructure's next run, or when it is found up to date.
	State state.Options
}

// Reconciler is the Infrastructure controller: Gardener's protocol around the Actuator.
type Reconciler = extension.Reconciler[*extensionsv1alpha1.Infrastructure]

// NewReconciler serves the given provider types and extension classes (shoot when none)
// with the actuator.
func NewReconciler(a *Actuator, types []string, classes []extensionsv1alpha1.ExtensionClass) *Reconciler {
	return &Reconciler{
		Kind:      "Infrastructure",
		Finalizer: Finalizer,
		Client:    a.Client,
		APIReader: a.APIReader,
		Recorder:  a.Recorder,
		Actuator:  a,
		NewObject: func() *extensionsv1alpha1.Infrastructure { return &extensionsv1alpha1.Infrastructure{} },
		Types:     types,
		Classes:   classes,
	}
}

// SetupWithManager registers the reconciler; besides the Infrastructures, a change of a
// referenced secret reconciles the ones using it, and so does the end of a run, which
// runEnds tells (executor.Pipeline.Ends).
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, r *Reconciler, runEnds source.Source, options controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &extensionsv1alpha1.Infrastructure{}, secretRefIndex, indexSecretRef); err != nil {
		return fmt.Errorf("indexing Infrastructures by secret: %w", err)
	}
	return r.SetupWithManager(ctx, mgr, options, func(b *builder.Builder) *builder.Builder {
		return b.WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, secret client.Object) []reconcile.Request {
			return infrastructuresUsingSecret(ctx, r, secret)
		})).WatchesRawSource(runEnds)
	})
}

func secretKeyOf(infra *extensionsv1alpha1.Infrastructure) client.ObjectKey {
	ref := infra.Spec.SecretRef
	if ref.Namespace == "" {
		return client.ObjectKey{Namespace: infra.Namespace, Name: ref.Name}
	}
	return client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
}

func indexSecretRef(obj client.Object) []string {
	return []string{secretKeyOf(obj.(*extensionsv1alpha1.Infrastructure)).String()}
}

func infrastructuresUsingSecret(ctx context.Context, r *Reconciler, secret client.Object) []reconcile.Request {
	list := &extensionsv1alpha1.InfrastructureList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{secretRefIndex: client.ObjectKeyFromObject(secret).String()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listingInfrastructuresForSecret", "secret", client.ObjectKeyFromObject(secret))
		return nil
	}
	var requests []reconcile.Request
	for _, infra := range list.Items {
		if r.Serves(&infra) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&infra)})
		}
	}
	return requests
}

type request = extension.Request[*extensionsv1alpha1.Infrastructure]

// operation is one operation of the actuator on one Infrastructure.
type operation struct {
	actuator *Actuator
	req      request
	infra    *extensionsv1alpha1.Infrastructure
}

func (a *Actuator) operation(req request) *operation {
	return &operation{actuator: a, req: req, infra: req.Object}
}

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
func (a *Actuator) Reconcile(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).apply(ctx, &applyScope{}))
}

// UpToDate is true when the credentials did not change since the last apply. A state kept
// in the other kind of object than State.Storage is moved first: a controller restarted with
// another --state-storage moves every state without a run.
func (a *Actuator) UpToDate(ctx context.Context, req request) (bool, error) {
	op := a.operation(req)
	if err := op.moveStateBetweenRuns(ctx); err != nil {
		return false, err
	}
	return op.upToDate(ctx)
}

// Delete destroys the infrastructure.
func (a *Actuator) Delete(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).delete(ctx))
}

// ForceDelete forgets the infrastructure without destroying it.
func (a *Actuator) ForceDelete(ctx context.Context, req request) error {
	return classify(a.operation(req).forceDelete(ctx))
}

// Migrate keeps the state in .status.state and releases the run objects.
func (a *Actuator) Migrate(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).migrate(ctx))
}

// Restore writes the state kept in .status.state back, then applies.
func (a *Actuator) Restore(ctx context.Context, req request) error {
	return a.outcome(req, a.operation(req).restore(ctx))
}

// Forget drops what the scheduler kept of a run of an Infrastructure that is gone, and
// its metrics.
func (a *Actuator) Forget(key client.ObjectKey) {
	forgetMetrics(key)
	if a.Runs != nil {
		a.Runs.ForgetName(run.ID{Namespace: key.Namespace, Name: key.Name, Purpose: run.PurposeInfra})
	}
}

// outcome says in lastOperation what an operation waits for, and classifies its error.
func (a *Actuator) outcome(req request, err error) error {
	describeWaiting(req.Object, err)
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
