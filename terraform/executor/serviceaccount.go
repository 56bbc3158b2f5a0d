package executor

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/terraseed/terraseed/terraform/run"
)

const (
	// DefaultServiceAccountName is the run pods' ServiceAccount when none is configured.
	DefaultServiceAccountName = "terraseed-terraformer"
	// DefaultClusterRole is the ClusterRole a run's ServiceAccount is bound to in its
	// namespace: what the terraformer may do with ConfigMaps and Secrets. The Helm chart
	// ships it.
	DefaultClusterRole = "terraseed-terraformer"
	// PurposeTerraformer marks the ServiceAccount and RoleBinding made for run pods.
	PurposeTerraformer = "terraformer"
)

func (e *PodExecutor) serviceAccountName() string {
	return cmp.Or(e.ServiceAccountName, DefaultServiceAccountName)
}

// EnsureServiceAccount creates or corrects, in namespace, the run pods' ServiceAccount
// and a RoleBinding granting it the ClusterRole there, and nowhere else.
func (e *PodExecutor) EnsureServiceAccount(ctx context.Context, namespace string) error {
	name := e.serviceAccountName()
	labels := map[string]string{run.LabelPurpose: PurposeTerraformer}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, e.Client, sa, func() error {
		sa.Labels = mergeLabels(sa.Labels, labels)
		return nil
	}); err != nil {
		return fmt.Errorf("writing ServiceAccount %s: %w", name, err)
	}
	roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cmp.Or(e.ClusterRole, DefaultClusterRole)}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(binding), binding)
	switch {
	case err == nil && binding.RoleRef != roleRef:
		// The role of a binding cannot change: replace the binding.
		if err := e.Client.Delete(ctx, binding, client.Preconditions{UID: &binding.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replacing RoleBinding %s: %w", name, err)
		}
		binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading RoleBinding %s: %w", name, err)
	}
	if _, err := controllerutil.CreateOrUpdate(ctx, e.Client, binding, func() error {
		binding.Labels = mergeLabels(binding.Labels, labels)
		binding.RoleRef = roleRef
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
		return nil
	}); err != nil {
		return fmt.Errorf("writing RoleBinding %s: %w", name, err)
	}
	return nil
}

func mergeLabels(existing, add map[string]string) map[string]string {
	if existing == nil {
		existing = map[string]string{}
	}
	for k, v := range add {
		existing[k] = v
	}
	return existing
}
