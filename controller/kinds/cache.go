package kinds

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run"
)

// CachedInfrastructures is what the manager's cache keeps of each Infrastructure: all
// but its managed fields and its .status.state, the controller's index of the state
// (up to 1 MiB each). A reconcile reads its Infrastructure from the API server, and
// what reads other Infrastructures' indexes lists them from there too (adoptsNoOthers);
// the cache serves the watch, the secretRef index and the progress of a run, which
// patches its lastOperation alone. Of ConfigMaps, watched for the deletion of a state
// object (watchDeletedStates), it keeps the metadata of the run objects alone, not of
// every ConfigMap of the seed. Of Secrets it keeps the metadata of all: the same informer
// serves the watch of the credentials Secrets (setup.go), which carry no run label.
func CachedInfrastructures() map[client.Object]cache.ByObject {
	stripManagedFields := cache.TransformStripManagedFields()
	runObjects, err := labels.NewRequirement(run.LabelPurpose, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	configMaps := &metav1.PartialObjectMetadata{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return map[client.Object]cache.ByObject{
		&extensionsv1alpha1.Infrastructure{}: {Transform: func(in any) (any, error) {
			out, err := stripManagedFields(in)
			if infra, ok := out.(*extensionsv1alpha1.Infrastructure); ok {
				infra.Status.State = nil
			}
			return out, err
		}},
		configMaps: {Label: labels.NewSelector().Add(*runObjects), Transform: stripManagedFields},
	}
}

// UncachedObjects are the kinds the manager's client must read live: a seed holds many
// of them, and caching every one would cost memory in proportion to the seed, not to
// the Infrastructures served.
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Pod{}, &corev1.ServiceAccount{}, &rbacv1.RoleBinding{}, &coordinationv1.Lease{}}
}
