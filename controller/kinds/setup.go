package kinds

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
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
	"github.com/terraseed/terraseed/terraform/run"
)

const secretRefIndex = "spec.secretRef"

// InfrastructureReconciler is the Infrastructure controller: Gardener's protocol around the
// Actuator.
type InfrastructureReconciler = extension.Reconciler[*extensionsv1alpha1.Infrastructure]

// NewInfrastructureReconciler serves Infrastructures of the given provider types and
// extension classes (shoot when none) with the actuator.
func NewInfrastructureReconciler(a *Actuator, types []string, classes []extensionsv1alpha1.ExtensionClass) *InfrastructureReconciler {
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

// SetupInfrastructure registers the Infrastructure reconciler; besides the
// Infrastructures, a change of a referenced secret reconciles the ones using it, and so
// does the end of a run, which runEnds tells (executor.Pipeline.Ends), and the deletion of
// a state object by someone else (keepDeletedState). Setup does the same for each other kind.
func SetupInfrastructure(ctx context.Context, mgr ctrl.Manager, r *InfrastructureReconciler, runEnds source.Source, options controller.Options) error {
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

// RunEnds returns the source of the ends of the runs of a purpose (executor.Pipeline.Ends).
type RunEnds func(purpose run.Purpose, clusterScoped bool) source.Source

// Setup serves, besides the Infrastructure (SetupInfrastructure), each of kinds that a provider of one of
// types serves from templates (templates.Kinds), for the types that serve it, and returns
// the kinds served. The runs of cluster-scoped kinds are kept in a.Namespace; without
// one, those kinds are not served.
func Setup(ctx context.Context, mgr ctrl.Manager, a *Actuator, kinds []templates.Kind, types []string, classes []extensionsv1alpha1.ExtensionClass, runEnds RunEnds, options controller.Options) ([]string, error) {
	var served []string
	for _, k := range []struct {
		kind  templates.Kind
		setup func(types []string) error
	}{
		{templates.KindBackupBucket, func(types []string) error {
			return setupKind[*extensionsv1alpha1.BackupBucket](ctx, mgr, a, backupBucketKind, types, classes, runEnds, options)
		}},
		{templates.KindBackupEntry, func(types []string) error {
			return setupKind[*extensionsv1alpha1.BackupEntry](ctx, mgr, a, backupEntryKind, types, classes, runEnds, options)
		}},
		{templates.KindDNSRecord, func(types []string) error {
			return setupKind[*extensionsv1alpha1.DNSRecord](ctx, mgr, a, dnsRecordKind, types, classes, runEnds, options)
		}},
		{templates.KindBastion, func(types []string) error {
			return setupKind[*extensionsv1alpha1.Bastion](ctx, mgr, a, bastionKind, types, classes, runEnds, options)
		}},
		{templates.Kind(exposureKind.purpose), func(types []string) error {
			return setupKind[*extensionsv1alpha1.SelfHostedShootExposure](ctx, mgr, a, exposureKind, types, classes, runEnds, options)
		}},
	} {
		kindTypes := Types(a.Providers, k.kind, types)
		if len(kindTypes) == 0 || !slices.Contains(kinds, k.kind) {
			continue
		}
		if kindsByPurpose[run.Purpose(k.kind)].clusterScoped && a.Namespace == "" {
			ctrl.LoggerFrom(ctx).Info("kindNotServed", "kind", k.kind, "reason", "no namespace for the runs of cluster-scoped kinds")
			continue
		}
		if err := k.setup(kindTypes); err != nil {
			return nil, fmt.Errorf("serving %s: %w", k.kind, err)
		}
		served = append(served, string(k.kind))
		a.kinds = append(a.kinds, kindsByPurpose[run.Purpose(k.kind)])
	}
	return served, nil
}

// Types are the spec.type values of kind that the providers of types serve.
func Types(providers *templates.Registry, kind templates.Kind, types []string) []string {
	var kindTypes []string
	for _, t := range types {
		p, err := providers.Provider(t)
		if err != nil {
			continue
		}
		if k, err := p.Kind(kind); err == nil {
			kindTypes = append(kindTypes, k.Types()...)
		}
	}
	slices.Sort(kindTypes)
	return slices.Compact(kindTypes)
}

func setupKind[T Subject](ctx context.Context, mgr ctrl.Manager, a *Actuator, kind *kindSpec, types []string, classes []extensionsv1alpha1.ExtensionClass, runEnds RunEnds, options controller.Options) error {
	r := newReconciler[T](a, kindActuator[T]{actuator: a, kind: kind}, kind, types, classes)
	return setupWithManager(ctx, mgr, r, kind, runEnds(kind.purpose, kind.clusterScoped), options)
}
