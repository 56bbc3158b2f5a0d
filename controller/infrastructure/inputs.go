package infrastructure

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// annotationSourceVersion records, on the stored credentials, the resourceVersion of the
// secret they were taken from: a changed secret means the infrastructure is not up to date.
const annotationSourceVersion = "terraseed.gardener.cloud/source-resource-version"

func (op *operation) objects() state.RunObjects {
	return state.RunObjects{ID: runIDOf(op.infra), MaxStateSize: op.actuator.MaxStateSize, Storage: op.actuator.StateStorage}
}

// runIDOf is the identity of an Infrastructure's runs.
func runIDOf(infra *extensionsv1alpha1.Infrastructure) run.ID {
	return run.ID{Namespace: infra.Namespace, Name: infra.Name, Purpose: run.PurposeInfra, UID: infra.UID}
}

// sourceSecret returns the secret spec.secretRef names, or nil when it does not exist.
func (op *operation) sourceSecret(ctx context.Context) (*corev1.Secret, error) {
	if ref := op.infra.Spec.SecretRef; ref.Namespace != "" && ref.Namespace != op.infra.Namespace && !op.actuator.AllowCrossNamespaceSecretRefs {
		return nil, credentialsUnavailable("spec.secretRef.namespace: %q is not the Infrastructure's namespace %q, and the operator allows no credentials from other namespaces", ref.Namespace, op.infra.Namespace)
	}
	secret := &corev1.Secret{}
	if err := op.actuator.APIReader.Get(ctx, secretKeyOf(op.infra), secret); err != nil {
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

func (op *operation) storeCredentials(ctx context.Context, source *corev1.Secret, env map[string]string) error {
	annotations := map[string]string{annotationSourceVersion: source.ResourceVersion}
	return op.objects().WriteCredentials(ctx, op.actuator.Client, op.infra, annotations, env, state.CreateFirst(op.req.FirstRun))
}

func envOf(secret *corev1.Secret) map[string]string {
	env := make(map[string]string, len(secret.Data))
	for name, value := range maps.All(secret.Data) {
		env[name] = string(value)
	}
	return env
}

func (op *operation) owner() *metav1.OwnerReference {
	return metav1.NewControllerRef(op.infra, extensionsv1alpha1.GroupVersion.WithKind("Infrastructure"))
}

// deleteRunObjects releases and deletes what the runs of this Infrastructure keep: the
// run objects, and what the executor keeps beside them (a local run directory).
func (op *operation) deleteRunObjects(ctx context.Context) error {
	if err := op.objects().Delete(ctx, op.actuator.Client); err != nil {
		return fmt.Errorf("deleting the run objects: %w", err)
	}
	if err := op.actuator.Runs.Clean(ctx, op.objects().ID); err != nil {
		return fmt.Errorf("removing the run directory: %w", err)
	}
	return nil
}
