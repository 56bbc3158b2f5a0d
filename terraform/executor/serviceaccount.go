package executor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/terraseed/terraseed/terraform/run"
)

const (
	// defaultServiceAccountName is the run pods' ServiceAccount when none is configured.
	defaultServiceAccountName = "terraseed-terraformer"
	// purposeTerraformer marks the ServiceAccount, Role and RoleBinding made for run pods.
	purposeTerraformer = "terraformer"
)

func (e *PodExecutor) serviceAccountName() string {
	return cmp.Or(e.ServiceAccountName, defaultServiceAccountName)
}

// EnsureServiceAccount creates or corrects, in the run's namespace, the run pods'
// ServiceAccount, a Role of the same name and a RoleBinding granting it the Role. The
// Role names every object a run of the namespace reads or writes (its configuration,
// state and state parts, its variables Secret), and it gains this run's: a run pod
// executes third-party provider plugins with cloud credentials and reaches no other
// ConfigMap or Secret of the namespace. RBAC cannot limit create by name (the state and
// its parts are created by the run), so create is granted for all of the kind the state
// is kept in, and the chart's admission policy <release>-terraformer-run-objects holds it
// to the names this Role lets the run update. The Role names every run's objects, since
// the runs of a namespace share it: the same policy holds each run pod to its own run's,
// by the pod name its token carries.
func (e *PodExecutor) EnsureServiceAccount(ctx context.Context, id run.ID) error {
	namespace, name := id.Namespace, e.serviceAccountName()
	labels := map[string]string{run.LabelPurpose: purposeTerraformer}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, e.Client, sa, func() error {
		sa.Labels = mergeLabels(sa.Labels, labels)
		return nil
	}); err != nil {
		return fmt.Errorf("writing ServiceAccount %s: %w", name, err)
	}
	if err := e.ensureRunRole(ctx, id, name, labels); err != nil {
		return err
	}
	roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	// RoleBindings are read from the API server, not a cache: one read per run decides.
	err := e.Client.Get(ctx, client.ObjectKeyFromObject(binding), binding)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading RoleBinding %s: %w", name, err)
	case binding.RoleRef != roleRef:
		// The role of a binding cannot change: replace the binding (a binding to the
		// ClusterRole of older releases, which covered every ConfigMap, too).
		if err := e.Client.Delete(ctx, binding, client.Preconditions{UID: &binding.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replacing RoleBinding %s: %w", name, err)
		}
		binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	default:
		current := binding.DeepCopy()
		binding.Labels = mergeLabels(binding.Labels, labels)
		binding.Subjects = subjects
		if equality.Semantic.DeepEqual(current, binding) {
			return nil
		}
		if err := e.Client.Update(ctx, binding); err != nil {
			return fmt.Errorf("writing RoleBinding %s: %w", name, err)
		}
		return nil
	}
	binding.Labels = mergeLabels(binding.Labels, labels)
	binding.RoleRef, binding.Subjects = roleRef, subjects
	if err := e.Client.Create(ctx, binding); err != nil {
		return fmt.Errorf("writing RoleBinding %s: %w", name, err)
	}
	return nil
}

// ensureRunRole adds the objects of the run id to the Role name, keeping those of the
// namespace's other runs. The state and its parts are named in the kind of object the
// runs keep them in (State.Storage) only: with Secrets, no ConfigMap but the configuration.
func (e *PodExecutor) ensureRunRole(ctx context.Context, id run.ID, name string, labels map[string]string) error {
	objects := e.objects(id)
	resource := objects.Storage.Resource()
	parts := objects.PartNames()
	// A state an older release split keeps its parts' names until it is written again.
	stored := objects.Storage.Object()
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: objects.StateName()}, stored); err == nil {
		parts = append(parts, objects.LegacyPartNames(stored)...)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %s %s: %w", objects.Storage.Kind(), objects.StateName(), err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, e.Client, role, func() error {
		role.Labels = mergeLabels(role.Labels, labels)
		// The names other runs of the namespace were granted, by what they are: a state
		// kept in the other kind before is named no more.
		configs := slices.Concat([]string{objects.ConfigName()}, namesOf(role.Rules, "configmaps", "update", isConfigName))
		vars := slices.Concat([]string{objects.VarsName()}, namesOf(role.Rules, "secrets", "get", isVarsName))
		written := slices.Concat([]string{objects.StateName()}, parts, namesOf(role.Rules, resource, "update", isStateName))
		deleted := slices.Concat(parts, namesOf(role.Rules, resource, "delete", isStateName))
		rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"create"}}}
		if resource == "configmaps" {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: sortedSet(slices.Concat(configs, written))})
		} else {
			rules = append(rules,
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: sortedSet(configs)},
				rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get", "update", "patch"}, ResourceNames: sortedSet(written)})
		}
		role.Rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"delete"}, ResourceNames: sortedSet(deleted)},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: sortedSet(vars)})
		return nil
	}); err != nil {
		return fmt.Errorf("writing Role %s: %w", name, err)
	}
	return nil
}

// The kinds of run object a Role names, by the suffix run.ID gives their names.
func isConfigName(name string) bool { return strings.HasSuffix(name, ".tf-config") }
func isVarsName(name string) bool   { return strings.HasSuffix(name, ".tf-vars") }
func isStateName(name string) bool  { return !isConfigName(name) && !isVarsName(name) }

// namesOf collects the resourceNames of the rules granting verb on resource that keep
// says to keep.
func namesOf(rules []rbacv1.PolicyRule, resource, verb string, keep func(string) bool) []string {
	var names []string
	for _, rule := range rules {
		if slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
			for _, name := range rule.ResourceNames {
				if keep(name) {
					names = append(names, name)
				}
			}
		}
	}
	return names
}

func sortedSet(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
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
