package infrastructure

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform"
)

// reconcile applies the infrastructure unless it is up to date.
func (op *operation) reconcile(ctx context.Context) error {
	if last := op.infra.Status.LastOperation; last != nil && last.Type == extensionsv1alpha1.LastOperationTypeMigrate {
		// Another seed owns (or is taking over) the resources; only a restore or the
		// deletion comes next.
		op.skipped = true
		return nil
	}
	provider, secret, err := op.inputs(ctx)
	if err != nil {
		return err
	}
	upToDate, err := op.upToDate(ctx, secret)
	if err != nil || upToDate {
		op.skipped = upToDate
		ctrl.LoggerFrom(ctx).V(1).Info("upToDate")
		return err
	}
	opType := normalOperationType(op.infra)
	if err := op.begin(ctx, opType, "Reconciling the infrastructure"); err != nil {
		return err
	}
	return op.apply(ctx, opType, provider, secret)
}

// restore writes the state kept in .status.state back into the state object, then applies:
// terraform finds every resource in the restored state and recreates none.
func (op *operation) restore(ctx context.Context) error {
	provider, secret, err := op.inputs(ctx)
	if err != nil {
		return err
	}
	opType := extensionsv1alpha1.LastOperationTypeRestore
	if err := op.begin(ctx, opType, "Restoring the infrastructure from .status.state"); err != nil {
		return err
	}
	state, err := decodeState(op.infra.Status.State)
	if err != nil {
		return err
	}
	if err := op.addFinalizer(ctx); err != nil {
		return err
	}
	if state != nil {
		if err := op.objects().WriteState(ctx, op.reconciler.Client, state); err != nil {
			return fmt.Errorf("writing the restored state: %w", err)
		}
	}
	return op.apply(ctx, opType, provider, secret)
}

func migratedAway(infra *extensionsv1alpha1.Infrastructure) bool {
	last := infra.Status.LastOperation
	return last != nil && last.Type == extensionsv1alpha1.LastOperationTypeMigrate && last.State == extensionsv1alpha1.LastOperationStateSucceeded
}

// inputs returns the provider and the credentials secret of the Infrastructure.
func (op *operation) inputs(ctx context.Context) (*templates.Provider, *corev1.Secret, error) {
	provider, err := op.reconciler.Providers.Provider(op.infra.Spec.Type)
	if err != nil {
		var unknown *templates.UnknownProviderError
		if errors.As(err, &unknown) {
			return nil, nil, &operationError{reason: ReasonInvalidConfiguration, codes: []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}, terminal: true, invalid: true, err: err}
		}
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
	return provider, secret, nil
}

// upToDate is true when the last reconcile succeeded for this generation with this
// version of the credentials, and nobody asked for another.
func (op *operation) upToDate(ctx context.Context, secret *corev1.Secret) (bool, error) {
	infra := op.infra
	last := infra.Status.LastOperation
	if _, asked := infra.Annotations[AnnotationOperation]; asked ||
		last == nil || last.State != extensionsv1alpha1.LastOperationStateSucceeded ||
		last.Type == extensionsv1alpha1.LastOperationTypeDelete ||
		infra.Status.ObservedGeneration != infra.Generation {
		return false, nil
	}
	stored, err := op.storedCredentials(ctx)
	if err != nil || stored == nil {
		return false, err
	}
	return stored.Annotations[annotationSourceVersion] == secret.ResourceVersion, nil
}

// apply renders the provider's configuration, runs terraform apply and reports the outputs.
func (op *operation) apply(ctx context.Context, opType extensionsv1alpha1.LastOperationType, provider *templates.Provider, secret *corev1.Secret) error {
	infra := op.infra
	cluster, err := op.cluster(ctx)
	if err != nil {
		return err
	}
	rendered, err := provider.Render(templates.Input{Infrastructure: infra, Cluster: cluster})
	if err != nil {
		return err
	}
	env, err := provider.Credentials(secret)
	if err != nil {
		return err
	}
	if err := op.addFinalizer(ctx); err != nil {
		return err
	}
	if err := op.storeCredentials(ctx, secret, env); err != nil {
		return err
	}
	objects := op.objects()
	if err := objects.WriteConfig(ctx, op.reconciler.Client, rendered.Files, terraform.CreateFirst(op.firstRun)); err != nil {
		return err
	}
	if err := objects.WriteVars(ctx, op.reconciler.Client, rendered.TFVarsJSON, terraform.CreateFirst(op.firstRun)); err != nil {
		return err
	}
	result, err := op.reconciler.run(ctx, terraform.Request{
		Namespace: infra.Namespace, Name: infra.Name, Owner: op.owner(), Command: terraform.Apply, Env: env,
	})
	if err != nil {
		return err
	}
	status, err := provider.Status(result.Outputs)
	if err != nil {
		return err
	}
	infra.Status.ProviderStatus = status.ProviderStatus
	infra.Status.NodesCIDR = status.NodesCIDR
	infra.Status.EgressCIDRs = status.EgressCIDRs
	infra.Status.ObservedGeneration = infra.Generation
	infra.Status.State = nil
	if err := op.succeed(ctx, opType, "The infrastructure is reconciled", ReasonReconciled); err != nil {
		return err
	}
	return op.removeOperation(ctx)
}
