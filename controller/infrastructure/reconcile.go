package infrastructure

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
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
	return op.apply(ctx, provider, secret)
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
	state, err := decodeState(op.infra.Status.State)
	if err != nil {
		return err
	}
	if err := op.req.EnsureFinalizer(ctx); err != nil {
		return err
	}
	if state != nil {
		if err := op.restoreState(ctx, state); err != nil {
			return err
		}
	}
	return op.apply(ctx, provider, secret)
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
// outputs, and the state for Gardener's backup of the shoot's state.
func (op *operation) apply(ctx context.Context, provider *templates.Provider, secret *corev1.Secret) error {
	infra := op.infra
	cluster := op.req.Cluster
	rendered, err := provider.Render(templates.Input{Infrastructure: infra, Cluster: cluster})
	if err != nil {
		return err
	}
	env, err := provider.Credentials(secret)
	if err != nil {
		return err
	}
	if err := op.req.EnsureFinalizer(ctx); err != nil {
		return err
	}
	if err := op.storeCredentials(ctx, secret, env); err != nil {
		return err
	}
	objects := op.objects()
	firstRun := state.CreateFirst(op.req.FirstRun)
	if err := objects.WriteConfig(ctx, op.actuator.Client, rendered.Files, firstRun); err != nil {
		return err
	}
	if err := objects.WriteVars(ctx, op.actuator.Client, rendered.TFVarsJSON, firstRun); err != nil {
		return err
	}
	result, err := op.actuator.run(ctx, op.applyRequest(ctx, provider.Manifest.ProtectedResources, env))
	if err != nil {
		return op.refused(err)
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
	infra.Status.ProviderStatus = status.ProviderStatus
	infra.Status.NodesCIDR = status.NodesCIDR
	infra.Status.EgressCIDRs = status.EgressCIDRs
	return op.keepStateInStatus(result.State)
}
