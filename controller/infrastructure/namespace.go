package infrastructure

import (
	"context"
	"encoding/json"
	"fmt"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
)

// localType is the embedded provider that creates a namespace of the name
// providerConfig.namespace, by default <infrastructure namespace>--<infrastructure name>.
const localType = "local"

// localNamespace is the namespace a local Infrastructure creates and owns.
func localNamespace(infra *extensionsv1alpha1.Infrastructure) string {
	if infra.Spec.ProviderConfig != nil {
		var config struct {
			Namespace string `json:"namespace"`
		}
		if json.Unmarshal(infra.Spec.ProviderConfig.Raw, &config) == nil && config.Namespace != "" {
			return config.Namespace
		}
	}
	return infra.Namespace + "--" + infra.Name
}

// checkLocalNamespace refuses a local Infrastructure whose providerConfig.namespace is the
// namespace another local Infrastructure, created before it, already owns: terraform would
// take over, change and on deletion destroy that Infrastructure's objects.
func (op *operation) checkLocalNamespace(ctx context.Context) error {
	if op.infra.Spec.Type != localType {
		return nil
	}
	target := localNamespace(op.infra)
	list := &extensionsv1alpha1.InfrastructureList{}
	if err := op.actuator.APIReader.List(ctx, list); err != nil {
		return fmt.Errorf("listing Infrastructures to check providerConfig.namespace: %w", err)
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == op.infra.UID || other.Spec.Type != localType || localNamespace(other) != target || !createdBefore(other, op.infra) {
			continue
		}
		return extension.InvalidInput(ReasonInvalidConfiguration, "providerConfig.namespace: %q is the namespace of Infrastructure %s/%s: choose another", target, other.Namespace, other.Name)
	}
	return nil
}

// createdBefore orders Infrastructures by creation, and by UID within the same second.
func createdBefore(a, b *extensionsv1alpha1.Infrastructure) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.UID < b.UID
}
