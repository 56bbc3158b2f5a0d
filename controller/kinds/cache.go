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
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// CachedObjects is what the manager's cache keeps of the kinds served and of the objects
// whose metadata it watches. Of each served object, what the watch, the secretRef index
// and the progress of a run (which patches its lastOperation alone) read: its metadata
// but the managed fields, its type, class and secretRef, its lastOperation
// (servedAsWatched). A reconcile reads its object from the API server, and what reads
// other objects' indexes (.status.state, up to 1 MiB each) lists them from there too
// (adoptsNoOthers). Of ConfigMaps, watched for the deletion of a state object
// (watchDeletedStates), it keeps the state objects alone, not every ConfigMap of the seed
// nor a run's other objects; of Secrets all but a run's other objects, since the same
// informer serves the watch of the credentials Secrets (setup.go), which carry no run
// label. Of both it keeps only the metadata those watches and terminatingState read
// (metadataWatched): a state object's annotations hold its index, and a seed's Secrets
// may carry anything.
func CachedObjects() map[client.Object]cache.ByObject {
	runObjects := requirement(run.LabelPurpose, selection.Exists)
	// The state objects alone: a run's other objects (LabelObject), and a state's parts
	// and history (LabelPartOf), are never watched; objects written before they were
	// labelled are, until written again.
	notState := requirement(tfstate.LabelObject, selection.DoesNotExist)
	notPartOfState := requirement(tfstate.LabelPartOf, selection.DoesNotExist)
	configMaps := &metav1.PartialObjectMetadata{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	secrets := &metav1.PartialObjectMetadata{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	cached := map[client.Object]cache.ByObject{
		configMaps: {Label: labels.NewSelector().Add(runObjects, notState, notPartOfState), Transform: metadataWatched},
		secrets:    {Label: labels.NewSelector().Add(notState, notPartOfState), Transform: metadataWatched},
	}
	for _, kind := range kindsByPurpose {
		cached[kind.newObject()] = cache.ByObject{Transform: servedAsWatched}
	}
	return cached
}

func requirement(key string, op selection.Operator) labels.Requirement {
	r, err := labels.NewRequirement(key, op, nil)
	if err != nil {
		panic(err)
	}
	return *r
}

// stripManagedFields is controller-runtime's transform, made once: servedAsWatched runs on
// every event of every served object.
var stripManagedFields = cache.TransformStripManagedFields()

// servedAsWatched is a served object as the cache keeps it: without its managed fields,
// its providerConfig, and the status fields but its lastOperation and observedGeneration.
func servedAsWatched(in any) (any, error) {
	out, err := stripManagedFields(in)
	if obj, ok := out.(Subject); ok {
		obj.GetExtensionSpec().ProviderConfig = nil
		status := obj.GetExtensionStatus()
		*status = extensionsv1alpha1.DefaultStatus{LastOperation: status.LastOperation, ObservedGeneration: status.ObservedGeneration}
	}
	return out, err
}

// metadataWatched keeps of an object's metadata what the watches of Secrets and state
// objects and terminatingState read: its name, labels, deletion, finalizers and version.
func metadataWatched(in any) (any, error) {
	obj, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	obj.Annotations = nil
	obj.ManagedFields = nil
	obj.OwnerReferences = nil
	return obj, nil
}

// UncachedObjects are the kinds the manager's client must read live: a seed holds many
// of them, and caching every one would cost memory in proportion to the seed, not to
// the Infrastructures served.
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Pod{}, &corev1.ServiceAccount{}, &rbacv1.RoleBinding{}, &coordinationv1.Lease{}}
}
