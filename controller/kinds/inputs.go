package kinds

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// annotationSourceVersion records, on the stored credentials, the resourceVersion of the
// secret they were taken from: a changed secret means the infrastructure is not up to date.
const annotationSourceVersion = run.LabelPrefix + "source-resource-version"

// annotationWorkloadIdentity marks stored credentials taken from a workload identity's
// Secret: they hold its other values, never its token, which the runs read from the
// Secret itself (run.Request.Files).
const annotationWorkloadIdentity = run.LabelPrefix + "workload-identity"

// credentialFiles are the credentials of secret that a run reads as files, from the
// Secret itself: a workload identity's token, which gardenlet renews while a run may
// outlive it, reaches the run as the Secret has it, and no copy of it is kept.
func credentialFiles(provider served, secret *corev1.Secret) map[string]corev1.SecretKeySelector {
	files := map[string]corev1.SecretKeySelector{}
	for env, key := range provider.CredentialFiles(secret) {
		files[env] = corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: key}
	}
	return files
}

func (op *operation) objects() state.RunObjects {
	return op.actuator.State.Objects(op.runID())
}

func (op *operation) runID() run.ID {
	return op.kind.runID(op.actuator.Namespace, op.obj.GetNamespace(), op.obj.GetName(), op.obj.GetUID())
}

// runID is the identity of the runs of an object of the kind: in its namespace, or in
// runsNamespace (the controller's) for a cluster-scoped kind.
func (k *kindSpec) runID(runsNamespace, namespace, name string, uid types.UID) run.ID {
	if k.clusterScoped {
		namespace = runsNamespace
	}
	return run.ID{Namespace: namespace, Name: name, Purpose: k.purpose, UID: uid}
}

// runIDOf is the identity of an Infrastructure's runs.
func runIDOf(infra *extensionsv1alpha1.Infrastructure) run.ID {
	return run.ID{Namespace: infra.Namespace, Name: infra.Name, Purpose: run.PurposeInfra, UID: infra.UID}
}

// secretKey is the Secret spec.secretRef names; a namespaced object's own namespace
// where the reference names none.
func (op *operation) secretKey() client.ObjectKey { return secretKeyOf(op.obj) }

// sourceSecret returns the secret spec.secretRef names, or nil when it does not exist.
func (op *operation) sourceSecret(ctx context.Context) (*corev1.Secret, error) {
	// A cluster-scoped object names the namespace of its Secret; only the operator creates one.
	if ref := op.obj.GetSecretRef(); !op.kind.clusterScoped && ref.Namespace != "" && ref.Namespace != op.obj.GetNamespace() && !op.actuator.AllowCrossNamespaceSecretRefs {
		return nil, credentialsUnavailable("spec.secretRef.namespace: %q is not the %s's namespace %q, and the operator allows no credentials from other namespaces", ref.Namespace, op.kind.name, op.obj.GetNamespace())
	}
	secret := &corev1.Secret{}
	if err := op.actuator.APIReader.Get(ctx, op.secretKey(), secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the secret of spec.secretRef: %w", err)
	}
	return secret, nil
}

// storedCredentials returns the credentials of the last run, or nil when none are stored.
func (op *operation) storedCredentials(ctx context.Context) (*corev1.Secret, error) {
	return op.objects().ReadCredentials(ctx, op.actuator.APIReader)
}

// storedEnv reads, as an apply starts (run.Request.LoadEnv), the credentials its
// preparation stored (storeCredentials): the ones the stored credentials say it ran with.
// It holds only the names it reads them by, so that a waiting run holds no credentials.
func (op *operation) storedEnv() func(context.Context) (map[string]string, error) {
	objects, reader := op.objects(), op.actuator.APIReader
	return func(ctx context.Context) (map[string]string, error) {
		stored, err := objects.ReadCredentials(ctx, reader)
		if err != nil {
			return nil, err
		}
		if stored == nil {
			return nil, fmt.Errorf("the stored credentials %s/%s are gone", objects.ID.Namespace, objects.ID.CredentialsName())
		}
		return envOf(stored), nil
	}
}

// sourceEnv reads, as a drift plan starts (run.Request.LoadEnv), the credentials of the
// Secret of spec.secretRef through the provider, as they are then.
func (op *operation) sourceEnv(provider served) func(context.Context) (map[string]string, error) {
	key, reader := op.secretKey(), op.actuator.APIReader
	return func(ctx context.Context) (map[string]string, error) {
		secret := &corev1.Secret{}
		if err := reader.Get(ctx, key, secret); err != nil {
			return nil, fmt.Errorf("reading the secret of spec.secretRef: %w", err)
		}
		return provider.Credentials(secret)
	}
}

func envOf(secret *corev1.Secret) map[string]string {
	env := make(map[string]string, len(secret.Data))
	for name, value := range maps.All(secret.Data) {
		env[name] = string(value)
	}
	return env
}

func (op *operation) owner() *metav1.OwnerReference {
	return metav1.NewControllerRef(op.obj, op.kind.gvk())
}

// inputs returns what the provider serves for the object and its credentials secret.
func (op *operation) inputs(ctx context.Context) (served, *corev1.Secret, error) {
	provider, err := op.served()
	if err != nil {
		return nil, nil, err
	}
	secret, err := op.sourceSecret(ctx)
	if err != nil {
		return nil, nil, err
	}
	if secret == nil {
		key := op.secretKey()
		return nil, nil, credentialsUnavailable("spec.secretRef: secret %s/%s not found", key.Namespace, key.Name)
	}
	if runs := op.runID().Namespace; len(provider.CredentialFiles(secret)) > 0 && secret.Namespace != runs {
		where := fmt.Sprintf("the %s's namespace %q", op.kind.name, runs)
		if op.kind.clusterScoped {
			where = fmt.Sprintf("the namespace of the %s's runs %q", op.kind.name, runs)
		}
		return nil, nil, credentialsUnavailable("spec.secretRef.namespace: the runs read files of secret %s/%s, a workload identity's token, from the Secret itself, which must be in %s: a run pod mounts Secrets of its own namespace only",
			secret.Namespace, secret.Name, where)
	}
	if keys := provider.OperatorOnlyCredentials(secret); len(keys) > 0 && !op.actuator.AllowOperatorOnlyCredentials {
		return nil, nil, credentialsUnavailable("data.%s of secret %s/%s: only the operator may allow this key (--allow-operator-only-credentials): it chooses where terraform sends every call",
			keys[0], secret.Namespace, secret.Name)
	}
	return provider, secret, nil
}

// served is what the provider of the object's spec.type serves for it; an unknown type is
// invalid input.
func (op *operation) served() (served, error) {
	provider, err := op.kind.serve(op.actuator.Providers, op.obj)
	if err != nil {
		if unknownType(err) {
			return nil, extension.InvalidInput(ReasonInvalidConfiguration, "spec.type: %w", err)
		}
		return nil, err
	}
	return provider, nil
}

func credentialsUnavailable(format string, args ...any) *extension.Error {
	return &extension.Error{
		Reason:   reasonCredentialsUnavailable,
		Codes:    []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem},
		Terminal: true,
		Err:      fmt.Errorf(format, args...),
	}
}

// upToDate is true when the credentials are the ones of the last apply.
func (op *operation) upToDate(ctx context.Context) (bool, error) {
	secret, err := op.sourceSecret(ctx)
	if err != nil || secret == nil {
		return false, err
	}
	stored, err := op.storedCredentials(ctx)
	if err != nil || stored == nil {
		return false, err
	}
	if templates.IsWorkloadIdentity(secret) {
		// gardenlet renews the token at about half its lifetime, a change of the Secret
		// that needs no apply: the runs read the token from the Secret. Its other values
		// must be the stored ones.
		provider, err := op.served()
		if err != nil {
			return false, nil
		}
		env, err := provider.Credentials(secret)
		return err == nil && stored.Annotations[annotationWorkloadIdentity] == "true" && maps.Equal(env, envOf(stored)), nil
	}
	return stored.Annotations[annotationSourceVersion] == secret.ResourceVersion && stored.Annotations[annotationWorkloadIdentity] == "", nil
}
