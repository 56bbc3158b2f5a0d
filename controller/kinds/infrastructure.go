// The Infrastructure: a shoot's network and what its nodes need, rendered from
// templates/<type>/ (provider.yaml, *.tf.tpl). It alone is planned for drift between
// applies (drift.go) and has gauges of its own (metrics.go).
//
// A reconcile reads, from the reconciler's call (controller/extension/operation.go):
// actuator.go (Actuator.Reconcile) → apply.go (its phases, in order) → runs.go (the run
// submitted, its outcome read back) → terraform/executor (scheduler.go, pipeline.go,
// local.go or pod.go) → terraform/terraformer (runner.go, apply.go); the outputs come back
// into its status through report, here.
// A deletion reads: actuator.go (Actuator.Delete) → delete.go (its phases, in order) →
// runs.go → terraform/executor (the same three files) → terraform/terraformer (runner.go,
// destroy.go): 8 files after the reconciler's.

package kinds

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
)

// InfrastructureFinalizer keeps an Infrastructure until its terraform resources are destroyed.
const InfrastructureFinalizer = "extensions.gardener.cloud/infrastructure"

var infrastructureKind = &kindSpec{
	name: "Infrastructure", purpose: run.PurposeInfra, finalizer: InfrastructureFinalizer, driftChecked: true, objectMetrics: true,
	newObject: func() Subject { return &extensionsv1alpha1.Infrastructure{} },
	newList:   func() client.ObjectList { return &extensionsv1alpha1.InfrastructureList{} },
	serve: func(providers *templates.Registry, obj Subject) (served, error) {
		provider, err := providers.Provider(obj.GetExtensionSpec().Type)
		if err != nil {
			return nil, err
		}
		return servedInfrastructure{provider}, nil
	},
}

// servedInfrastructure is the provider's Infrastructure.
type servedInfrastructure struct{ *templates.Provider }

func (p servedInfrastructure) render(obj Subject, cluster *extensionsv1alpha1.Cluster, workloadIdentity bool) (*templates.Rendered, error) {
	return p.Render(templates.Input{Infrastructure: obj.(*extensionsv1alpha1.Infrastructure), Cluster: cluster, WorkloadIdentity: workloadIdentity})
}

func (p servedInfrastructure) protectedResources() []string { return p.Manifest.ProtectedResources }
func (p servedInfrastructure) statusOutputs() []string      { return p.Manifest.Status.Outputs() }
func (p servedInfrastructure) fleet() *templates.Provider   { return p.Provider }

// check has nothing to refuse before the apply: a local namespace that another object
// owns is refused by the cluster itself (see "local.owner" in templates/local).
func (p servedInfrastructure) check(context.Context, *operation) error { return nil }

func (p servedInfrastructure) report(outputs map[string]any) (report, error) {
	status, err := p.Status(outputs)
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, op *operation) error {
		infra := op.obj.(*extensionsv1alpha1.Infrastructure)
		infra.Status.ProviderStatus = status.ProviderStatus
		infra.Status.NodesCIDR = status.NodesCIDR
		infra.Status.EgressCIDRs = status.EgressCIDRs
		return nil
	}, nil
}
