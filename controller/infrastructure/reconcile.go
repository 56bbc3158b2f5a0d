package infrastructure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/state"
)

func (op *operation) reconcile(ctx context.Context) error {
	provider, secret, err := op.inputs(ctx)
	if err != nil {
		return err
	}
	if err := op.checkLocalNamespace(ctx); err != nil {
		return err
	}
	return op.apply(ctx, provider, secret, nil)
}

// restore writes the state kept in .status.state back into the state object, then applies:
// terraform finds every resource in the restored state and recreates none. A restore
// retried after a failed apply keeps the newer state that apply wrote.
func (op *operation) restore(ctx context.Context) error {
	provider, secret, err := op.inputs(ctx)
	if err != nil {
		return err
	}
	if err := op.checkLocalNamespace(ctx); err != nil {
		return err
	}
	state, err := decodeState(op.infra.Status.State, op.actuator.MaxStateSize)
	if err != nil {
		return err
	}
	return op.apply(ctx, provider, secret, state)
}

// inputs returns the provider and the credentials secret of the Infrastructure.
func (op *operation) inputs(ctx context.Context) (*templates.Provider, *corev1.Secret, error) {
	provider, err := op.actuator.Providers.Provider(op.infra.Spec.Type)
	if err != nil {
		var unknown *templates.UnknownProviderError
		if errors.As(err, &unknown) {
			return nil, nil, extension.InvalidInput(ReasonInvalidConfiguration, "%w", err)
		}
		return nil, nil, err
	}
	secret, err := op.sourceSecret(ctx)
	if err != nil {
		return nil, nil, err
	}
	if secret == nil {
		key := secretKeyOf(op.infra)
		return nil, nil, credentialsUnavailable("spec.secretRef: secret %s/%s not found", key.Namespace, key.Name)
	}
	if keys := provider.OperatorOnlyCredentials(secret); len(keys) > 0 && !op.actuator.AllowOperatorOnlyCredentials {
		return nil, nil, credentialsUnavailable("data.%s of secret %s/%s: only the operator may allow this key (--allow-operator-only-credentials): it chooses where terraform sends every call",
			keys[0], secret.Namespace, secret.Name)
	}
	return provider, secret, nil
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
	return stored.Annotations[annotationSourceVersion] == secret.ResourceVersion, nil
}

// apply renders the provider's configuration, runs terraform apply and reports the
// outputs, and the state for Gardener's backup of the shoot's state. A restored state is
// written before the run starts.
func (op *operation) apply(ctx context.Context, provider *templates.Provider, secret *corev1.Secret, restored []byte) error {
	infra := op.infra
	rendered, err := provider.Render(templates.Input{Infrastructure: infra, Cluster: op.req.Cluster})
	if err != nil {
		return err
	}
	env, err := provider.Credentials(secret)
	if err != nil {
		return err
	}
	adoptions, err := op.adoptions()
	if err != nil {
		return err
	}
	// The run indexes every state it saves with the provider's import IDs.
	rendered.Files[state.ImportIDsKey] = provider.ImportIDsFile()
	req, err := op.applyRequest(provider.Manifest.ProtectedResources, env)
	if err != nil {
		return err
	}
	req = op.withFleet(req, provider)
	req.Digest = configDigest(rendered.Files, rendered.TFVarsJSON, req)
	result, err := op.runOrWait(ctx, req, op.priority(), func(ctx context.Context) error {
		if err := op.prepareApply(ctx, secret, env, rendered, restored, adoptions); err != nil {
			return err
		}
		op.allowedOnce(req)
		return nil
	})
	if err != nil {
		return throttledError(provider, op.refused(err))
	}
	outputs, err := op.keepSensitiveOutputs(ctx, provider, result.State)
	if err != nil {
		return err
	}
	status, err := provider.Status(outputs)
	if err != nil {
		return err
	}
	if err := op.afterApply(ctx, result.Plan); err != nil {
		return err
	}
	op.recovered()
	if err := op.adopted(ctx); err != nil {
		return err
	}
	infra.Status.ProviderStatus = status.ProviderStatus
	infra.Status.NodesCIDR = status.NodesCIDR
	infra.Status.EgressCIDRs = status.EgressCIDRs
	index := op.indexOf(result.State)
	op.keepHistory(ctx, result.State, index)
	return op.keepStateInStatus(result.State, index)
}

// prepareApply writes what an apply reads, once, before its run is submitted.
func (op *operation) prepareApply(ctx context.Context, secret *corev1.Secret, env map[string]string, rendered *templates.Rendered, restored []byte, adoptions map[string]string) error {
	if err := op.req.EnsureFinalizer(ctx); err != nil {
		return err
	}
	if err := op.storeCredentials(ctx, secret, env); err != nil {
		return err
	}
	objects := op.objects()
	if restored != nil {
		if err := op.restoreState(ctx, restored); err != nil {
			return err
		}
	}
	files, err := op.withImports(ctx, rendered.Files, adoptions)
	if err != nil {
		return err
	}
	firstRun := state.CreateFirst(op.req.FirstRun)
	if err := objects.WriteConfig(ctx, op.actuator.Client, files, firstRun); err != nil {
		return err
	}
	return objects.WriteVars(ctx, op.actuator.Client, rendered.TFVarsJSON, firstRun)
}

// priority is the run priority of the operation: a first apply or a restoration before
// the reconciles of objects that exist.
func (op *operation) priority() executor.Priority {
	switch op.req.Operation {
	case extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationTypeRestore:
		return executor.PriorityCreate
	case extensionsv1alpha1.LastOperationTypeDelete:
		return executor.PriorityDelete
	default:
		return executor.PriorityReconcile
	}
}

// configDigest identifies what a run works on: the files, the variables and the guard,
// not the credentials. A run pod of another digest is never adopted as this run.
func configDigest(files map[string]string, vars []byte, req executor.Request) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", name, len(files[name]), files[name])
	}
	fmt.Fprintf(h, "vars\x00%d\x00%s\x00", len(vars), vars)
	fmt.Fprintf(h, "guard\x00%s\x00%t", strings.Join(req.ProtectedTypes, ","), req.AllowDestroy)
	// Only when set: the digests of runs under way from before plans could be allowed stay.
	if req.AllowDestroyPlan != "" {
		fmt.Fprintf(h, "\x00%s", req.AllowDestroyPlan)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
