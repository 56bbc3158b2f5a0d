package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/tracing"
)

const (
	// Finalizer keeps a ControlPlane until the objects it deployed are removed.
	Finalizer = "extensions.gardener.cloud/controlplane"
	// FieldManager owns the applied fields.
	FieldManager = "terraseed"
	// OwnerLabelGroup prefixes the labels every applied object carries, <group>/name and
	// <group>/namespace of its ControlPlane: a subdomain of the one domain of terraseed's
	// labels, terraseed.gardener.cloud.
	OwnerLabelGroup = "controlplane." + run.Domain
)

// Reasons of the Ready condition; each failure carries one.
const (
	reasonInvalidConfiguration = extension.ReasonInvalid
	reasonProviderBroken       = "ProviderBroken"
	reasonApplyFailed          = "ApplyFailed"
	reasonDeleteFailed         = "DeleteFailed"
)

// deletionRecheck is how soon a delete looks again at objects still being deleted: the
// reconcile returns meanwhile instead of holding a worker.
const deletionRecheck = 2 * time.Second

// Actuator deploys what a ControlPlane's provider renders.
type Actuator struct {
	// Client reads and writes ControlPlanes.
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Providers *templates.Registry
	// Resources applies, prunes and deletes the rendered objects with an uncached client:
	// caching every kind a provider may render would cost memory for the whole seed.
	Resources *ssa.ResourceManager
	// AllowedImages are the prefixes every container image the control plane renders
	// must start with (the operator's list); none allows every image.
	AllowedImages []string
}

// NewResourceManager is the ResourceManager an Actuator needs, on a client that reads live.
func NewResourceManager(c client.Client) *ssa.ResourceManager {
	return ssa.NewResourceManager(c, nil, ssa.Owner{Field: FieldManager, Group: OwnerLabelGroup})
}

// Reconciler is the ControlPlane controller: Gardener's protocol around the Actuator.
type Reconciler = extension.Reconciler[*extensionsv1alpha1.ControlPlane]

// NewReconciler serves the given provider types and extension classes (shoot when none).
func NewReconciler(a *Actuator, types []string, classes []extensionsv1alpha1.ExtensionClass) *Reconciler {
	return &Reconciler{
		Kind:      "ControlPlane",
		Finalizer: Finalizer,
		Client:    a.Client,
		APIReader: a.APIReader,
		Recorder:  a.Recorder,
		Actuator:  a,
		NewObject: func() *extensionsv1alpha1.ControlPlane { return &extensionsv1alpha1.ControlPlane{} },
		Types:     types,
		Classes:   classes,
	}
}

type request = extension.Request[*extensionsv1alpha1.ControlPlane]

// Reconcile applies the rendered objects, then prunes those no longer rendered.
func (a *Actuator) Reconcile(ctx context.Context, req request) error {
	cp := req.Object
	rendered, err := a.render(ctx, req)
	if err != nil {
		return err
	}
	if err := a.checkNamespaced(rendered.Objects); err != nil {
		return err
	}
	if err := req.EnsureFinalizer(ctx); err != nil {
		return err
	}
	previous, err := readState(cp)
	if err != nil {
		return err
	}
	applied := previous.inventory
	a.Resources.SetOwnerLabels(rendered.Objects, cp.Name, cp.Namespace)
	next := inventoryOf(rendered.Objects)
	renderedDigest, err := digest(rendered.Objects, rendered.ProviderStatus)
	if err != nil {
		return err
	}

	// Whatever happens during the apply, every object that may exist stays known.
	record{inventory: applied.union(next)}.write(cp)
	if err := req.PatchStatus(ctx); err != nil {
		return err
	}

	changes, err := a.Resources.ApplyAllStaged(ctx, rendered.Objects, ssa.ApplyOptions{
		// Objects of a ControlPlane are ours alone: an immutable field that changed
		// (a Deployment's selector) recreates the object.
		Force:        true,
		WaitInterval: 2 * time.Second,
		WaitTimeout:  time.Minute,
	})
	if err != nil {
		return &extension.Error{Reason: reasonApplyFailed, Err: fmt.Errorf("applying the control plane: %w", err)}
	}
	pruned, err := a.Resources.DeleteAll(ctx, applied.without(next).objects(), a.deleteOptions(cp))
	if err != nil {
		return &extension.Error{Reason: reasonApplyFailed, Err: fmt.Errorf("removing objects no longer rendered: %w", err)}
	}
	record{inventory: next, rendered: renderedDigest}.write(cp)
	cp.Status.ProviderStatus = rendered.ProviderStatus
	a.reportChanges(ctx, cp, changes, pruned)
	return nil
}

// UpToDate is true when the provider renders what was applied last. Gardener's reconcile
// request, a changed spec or a failed operation always reconcile.
func (a *Actuator) UpToDate(ctx context.Context, req request) (bool, error) {
	previous, err := readState(req.Object)
	if err != nil || previous.rendered == "" {
		return false, nil
	}
	rendered, err := a.render(ctx, req)
	if err != nil {
		return false, nil // the reconcile reports it
	}
	a.Resources.SetOwnerLabels(rendered.Objects, req.Object.Name, req.Object.Namespace)
	renderedDigest, err := digest(rendered.Objects, rendered.ProviderStatus)
	return err == nil && renderedDigest == previous.rendered, nil
}

// Delete removes every object the ControlPlane deployed; the operation ends once they
// are gone, looked at again every few seconds without holding a worker.
func (a *Actuator) Delete(ctx context.Context, req request) error {
	return a.remove(ctx, req, true)
}

// ForceDelete removes the objects without waiting for them: a shoot being force-deleted
// has nothing left to wait for.
func (a *Actuator) ForceDelete(ctx context.Context, req request) error {
	return a.remove(ctx, req, false)
}

// Migrate removes the objects from this seed, keeping the inventory in .status.state; the
// control plane runs in the seed the shoot moves to.
func (a *Actuator) Migrate(ctx context.Context, req request) error {
	return a.remove(ctx, req, true)
}

// Restore deploys the control plane in this seed, as a reconcile does.
func (a *Actuator) Restore(ctx context.Context, req request) error {
	return a.Reconcile(ctx, req)
}

func (a *Actuator) remove(ctx context.Context, req request, wait bool) error {
	previous, err := readState(req.Object)
	if err != nil {
		return err
	}
	objects := previous.inventory.objects()
	if _, err := a.Resources.DeleteAll(ctx, objects, a.deleteOptions(req.Object)); err != nil {
		return &extension.Error{Reason: reasonDeleteFailed, Err: fmt.Errorf("deleting the control plane's objects: %w", err)}
	}
	if !wait {
		return nil
	}
	remaining, err := a.remaining(ctx, objects)
	if err != nil {
		return &extension.Error{Reason: reasonDeleteFailed, Err: err}
	}
	if len(remaining) > 0 {
		return &extension.Error{Reason: reasonDeleteFailed, RetryAfter: deletionRecheck,
			Err: fmt.Errorf("waiting for %s to be deleted", strings.Join(remaining, ", "))}
	}
	return nil
}

// remaining names the objects that still exist.
func (a *Actuator) remaining(ctx context.Context, objects []*unstructured.Unstructured) ([]string, error) {
	var remaining []string
	for _, obj := range objects {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(obj.GroupVersionKind())
		err := a.Resources.Client().Get(ctx, client.ObjectKeyFromObject(obj), existing)
		if err == nil {
			remaining = append(remaining, obj.GetKind()+"/"+obj.GetName())
		} else if !isGone(err) {
			return nil, err
		}
	}
	return remaining, nil
}

// isGone is true when the object, or its kind, no longer exists.
func isGone(err error) bool {
	return client.IgnoreNotFound(err) == nil || meta.IsNoMatchError(err)
}

// deleteOptions delete only objects still labelled as this ControlPlane's, so that an
// object somebody else took over is left alone.
func (a *Actuator) deleteOptions(cp *extensionsv1alpha1.ControlPlane) ssa.DeleteOptions {
	return ssa.DeleteOptions{
		PropagationPolicy: metav1.DeletePropagationBackground,
		Inclusions:        a.Resources.GetOwnerLabels(cp.Name, cp.Namespace),
	}
}

func (a *Actuator) render(ctx context.Context, req request) (_ *templates.RenderedControlPlane, err error) {
	_, span := tracing.Start(ctx, "render")
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	cp := req.Object
	provider, err := a.Providers.Provider(cp.Spec.Type)
	if err != nil {
		return nil, extension.InvalidInput(reasonInvalidConfiguration, "spec.type: %v", err)
	}
	rendered, err := provider.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: cp, Cluster: req.Cluster})
	var invalid *templates.ValidationError
	var none *templates.NoControlPlaneError
	switch {
	case err == nil:
		if err := a.checkImages(rendered.Objects); err != nil {
			return nil, err
		}
		return rendered, nil
	case errors.As(err, &invalid):
		return nil, &extension.Error{Reason: reasonInvalidConfiguration, Codes: invalid.Codes(), Terminal: true, Invalid: true, Err: err}
	case errors.As(err, &none):
		return nil, extension.InvalidInput(reasonInvalidConfiguration, "spec.type: %v", err)
	default:
		// A provider's template fails the same way until the provider is fixed.
		return nil, &extension.Error{Reason: reasonProviderBroken, Terminal: true, Err: err}
	}
}

// checkNamespaced refuses cluster-scoped kinds before anything is applied: a control plane
// lives in its shoot's namespace. Kinds the API server does not know fail in the apply.
func (a *Actuator) checkNamespaced(objects []*unstructured.Unstructured) error {
	mapper := a.Resources.Client().RESTMapper()
	for _, obj := range objects {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return &extension.Error{Reason: reasonProviderBroken, Terminal: true,
				Err: fmt.Errorf("the provider renders %s %s, which is not namespaced: a control plane deploys into its shoot's namespace only", gvk.Kind, obj.GetName())}
		}
	}
	return nil
}

// reportChanges logs what the apply changed and tells it in an event, only when something did.
func (a *Actuator) reportChanges(ctx context.Context, cp *extensionsv1alpha1.ControlPlane, changes ...*ssa.ChangeSet) {
	var changed []string
	for _, set := range changes {
		if set == nil {
			continue
		}
		for _, entry := range set.Entries {
			if entry.Action == ssa.CreatedAction || entry.Action == ssa.ConfiguredAction || entry.Action == ssa.DeletedAction {
				changed = append(changed, entry.String())
			}
		}
	}
	if len(changed) == 0 {
		return
	}
	ctrl.LoggerFrom(ctx).Info("controlPlaneChanged", "changes", changed)
	if a.Recorder != nil {
		a.Recorder.Eventf(cp, nil, corev1.EventTypeNormal, "Applied", "Reconcile", "%s", strings.Join(changed, "; "))
	}
}
