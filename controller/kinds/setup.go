package kinds

import (
	"context"
	"fmt"
	"slices"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/source"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
)

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

// RunEnds returns the source of the ends of the runs of a purpose (executor.Pipeline.Ends).
type RunEnds func(purpose run.Purpose, clusterScoped bool) source.Source

// SetupKinds serves, besides the Infrastructure, each of kinds that a provider of one of
// types serves from templates (templates.Kinds), for the types that serve it, and returns
// the kinds served. The runs of cluster-scoped kinds are kept in a.Namespace; without
// one, those kinds are not served.
func SetupKinds(ctx context.Context, mgr ctrl.Manager, a *Actuator, kinds []templates.Kind, types []string, classes []extensionsv1alpha1.ExtensionClass, runEnds RunEnds, options controller.Options) ([]string, error) {
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
		kindTypes := KindTypes(a.Providers, k.kind, types)
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

// KindTypes are the spec.type values of kind that the providers of types serve.
func KindTypes(providers *templates.Registry, kind templates.Kind, types []string) []string {
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
