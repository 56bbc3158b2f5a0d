package kinds

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/purge"
	"github.com/terraseed/terraseed/terraform/run"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

// deleteScope is what the phases of one deletion read and write.
type deleteScope struct {
	// nothingToDestroy is true when no state holds anything to destroy: the deletion only
	// removes what the runs kept.
	nothingToDestroy bool
	// provider is what the object's provider serves for it; nil when it is unknown, which
	// a deletion goes on without.
	provider served
	request  run.Request
}

// delete destroys what terraform created and removes what the runs kept. Any other run
// of the object is dropped, stopped or waited for first (see endRuns), so that the destroy
// starts from the final state and nothing writes for the object once it is gone. It takes
// several reconciles, as an apply does.
func (op *operation) delete(ctx context.Context) error {
	return runPhases(ctx, &deleteScope{}, []phase[deleteScope]{
		op.removeEtcdBackup,   // a BackupEntry's etcd-backup Secret, before anything else as Gardener's extensions do
		op.endOtherRuns,       // every run of the object but the deletion's own destroy ended
		op.findStateToDestroy, // whether there is a state to destroy; a lost one found again
		op.destroyRequest,     // the destroy request with the credentials, of the last run if the secret is gone
		op.runOrWaitDestroy,   // the destroy's outcome once it ended; until then prepare and submit it
		op.removeRunObjects,   // the run objects and the run directory
		op.removeGenerated,    // what the object's status named beside its resources: a BackupBucket's Secret
	})
}

// prepareDestroy writes what the destroy's run reads, once, before it is submitted.
func (op *operation) prepareDestroy(ctx context.Context, s *deleteScope) error {
	return runPhases(ctx, s, []phase[deleteScope]{
		op.ensureConfig,             // the configuration last applied, rendered again when there is none
		op.recoverBeforeDestroy,     // a state lost since the deletion began found again
		op.interruptedBeforeDestroy, // nothing an interrupted create may have made left behind
	})
}

func (op *operation) endOtherRuns(ctx context.Context, _ *deleteScope) error {
	return op.endRuns(ctx, run.Destroy, false)
}

func (op *operation) findStateToDestroy(ctx context.Context, s *deleteScope) error {
	// A run known here is the deletion's own destroy (endRuns ended any other): wait for
	// it, or take its outcome.
	if _, known := op.actuator.Runs.Lookup(op.objects().ID); known {
		return nil
	}
	found, err := op.stateToDestroy(ctx, s)
	if err != nil {
		return err
	}
	s.nothingToDestroy = !found
	if s.nothingToDestroy {
		// A first create killed before it saved anything left no state, and maybe a resource.
		return op.interruptedBeforeDestroy(ctx, s)
	}
	return nil
}

// stateToDestroy says whether there is a state to destroy. No run writes the state now:
// a missing or corrupt one is found again here. A state that reads is checked before the
// destroy starts (see prepareDestroy), never while it runs.
func (op *operation) stateToDestroy(ctx context.Context, s *deleteScope) (bool, error) {
	state, err := op.objects().ReadState(ctx, op.actuator.Client)
	if err != nil && !errors.Is(err, tfstate.ErrCorrupt) {
		return false, op.stateNotReadNow(err)
	}
	if state != nil && err == nil {
		return true, nil
	}
	if err := op.recoverBeforeDestroy(ctx, s); err != nil {
		return false, err
	}
	if state, err = op.objects().ReadState(ctx, op.actuator.Client); err != nil {
		return false, fmt.Errorf("reading the state: %w", err)
	}
	return state != nil, nil
}

// recoverBeforeDestroy finds a lost state again from the history, as an apply does, so
// that the destroy removes what the history knows. What only the index knows a destroy
// cannot remove: terraform imports nothing for one (Terraform and OpenTofu since 1.9
// ignore import blocks then). The deletion stops there rather than delete the index and
// the history with the run objects and leave those resources behind unseen.
func (op *operation) recoverBeforeDestroy(ctx context.Context, _ *deleteScope) error {
	r, err := op.findLostState(ctx, func(string) bool { return true })
	if r == nil || err != nil {
		return err
	}
	missing := append(slices.Sorted(maps.Keys(r.imports)), r.unimportable...)
	if len(missing) == 0 {
		return op.recovering(ctx, r.message)
	}
	// Not terminal: with the state restored from a backup, a retry goes on by itself.
	return &extension.Error{
		Reason: reasonStateLost,
		Err: fmt.Errorf("the state in %s %s %s, and no state of its history holds %d resources its index names: %s. "+
			"A destroy removes only what a state holds, so they would be left behind: restore the state from a backup, "+
			"or remove them by hand and confirm the shoot's force deletion (annotation %s)",
			op.objects().Storage.Kind(), op.objects().StateName(), r.cause, len(missing), strings.Join(missing, ", "), extension.AnnotationForceDeletion),
	}
}

// interruptedBeforeDestroy stops the deletion where a failed apply left creates under way
// that the state does not hold: a destroy would not find them.
func (op *operation) interruptedBeforeDestroy(ctx context.Context, _ *deleteScope) error {
	return op.refuseInterrupted(ctx, func(string) bool { return false })
}

func (op *operation) destroyRequest(ctx context.Context, s *deleteScope) error {
	if s.nothingToDestroy {
		return nil
	}
	env, files, secret, err := op.destroyCredentials(ctx)
	if err != nil {
		return err
	}
	req := run.Request{
		ID: op.objects().ID, Owner: op.owner(), Command: run.Destroy, Env: env, Files: files,
		Progress: op.actuator.progressReporter(op.kind, client.ObjectKeyFromObject(op.obj)),
	}
	provider, err := op.served()
	if err == nil {
		req = op.withFleet(req, provider, secret)
		s.provider = provider
	}
	s.request = req
	return nil
}

// destroyCredentials prefers the referenced secret and falls back to the credentials of
// the last run, so that a deletion never waits on a secret deleted first; a workload
// identity's token is never stored, so its Secret must be there. It returns the Secret
// read, nil where the stored credentials stand in for it.
func (op *operation) destroyCredentials(ctx context.Context) (map[string]string, map[string]corev1.SecretKeySelector, *corev1.Secret, error) {
	provider, secret, err := op.inputs(ctx)
	var opErr *extension.Error
	switch {
	case err == nil:
		env, err := provider.Credentials(secret)
		return env, credentialFiles(provider, secret), secret, err
	case errors.As(err, &opErr) && opErr.Reason == reasonCredentialsUnavailable:
		stored, storedErr := op.storedCredentials(ctx)
		if storedErr != nil {
			return nil, nil, nil, storedErr
		}
		key := op.secretKey()
		if stored == nil {
			return nil, nil, nil, credentialsUnavailable("spec.secretRef: secret %s/%s not found and no credentials of an earlier run are stored: recreate the secret to destroy what the %s made", key.Namespace, key.Name, op.kind.name)
		}
		if stored.Annotations[annotationWorkloadIdentity] == "true" {
			return nil, nil, nil, credentialsUnavailable("spec.secretRef: secret %s/%s not found, and the runs read a workload identity's token from it, which is never stored: recreate the secret (its CredentialsBinding) to destroy what the %s made", key.Namespace, key.Name, op.kind.name)
		}
		return envOf(stored), nil, nil, nil
	default:
		return nil, nil, nil, err
	}
}

func (op *operation) runOrWaitDestroy(ctx context.Context, s *deleteScope) error {
	if s.nothingToDestroy {
		return nil
	}
	_, err := op.runOrWait(ctx, s.request, run.PriorityDelete, func(ctx context.Context) error { return op.prepareDestroy(ctx, s) })
	if s.provider != nil {
		return throttledError(s.provider, err)
	}
	return err
}

// ensureConfig keeps the configuration that was last applied; only when there is none is
// it rendered again, since destroying needs the provider configuration.
func (op *operation) ensureConfig(ctx context.Context, _ *deleteScope) error {
	objects := op.objects()
	kept := &corev1.ConfigMap{}
	err := op.actuator.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.ConfigName()}, kept)
	if err == nil {
		return op.ensurePurge(ctx, kept)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	provider, err := op.served()
	if err != nil {
		return err
	}
	// The configuration of the Secret's kind of credentials: a workload identity's renders
	// other provider settings. A Secret that cannot be read (gone, or of a namespace not
	// allowed) leaves the static keys' configuration, as the credentials of the last run are.
	secret, _ := op.sourceSecret(ctx)
	rendered, err := provider.render(op.obj, op.req.Cluster, templates.IsWorkloadIdentity(secret))
	if err != nil {
		return err
	}
	if rendered.Purge != "" {
		rendered.Files[purge.Key] = rendered.Purge
	}
	if err := objects.WriteConfig(ctx, op.actuator.Client, rendered.Files); err != nil {
		return err
	}
	return objects.WriteVars(ctx, op.actuator.Client, rendered.TFVarsJSON)
}

// ensurePurge gives a kept configuration the purge its kind declares now: one last
// applied before the declaration (by an earlier version) would destroy without it and
// leave the backups. The purge runs no terraform, so the configuration it joins stays the
// one that made the state.
func (op *operation) ensurePurge(ctx context.Context, kept *corev1.ConfigMap) error {
	// A type no longer served destroys with the kept configuration as it is.
	provider, err := op.kind.serve(op.actuator.Providers, op.obj)
	if err != nil {
		return nil
	}
	kind, ok := provider.(servedKind)
	if !ok || kind.Manifest.Purge == nil {
		return nil
	}
	secret, _ := op.sourceSecret(ctx)
	rendered, err := kind.render(op.obj, op.req.Cluster, templates.IsWorkloadIdentity(secret))
	if err != nil {
		return err
	}
	if kept.Data[purge.Key] == rendered.Purge {
		return nil
	}
	patch := client.MergeFrom(kept.DeepCopy())
	if rendered.Purge == "" {
		delete(kept.Data, purge.Key)
	} else {
		if kept.Data == nil {
			kept.Data = map[string]string{}
		}
		kept.Data[purge.Key] = rendered.Purge
	}
	return op.actuator.Client.Patch(ctx, kept, patch)
}

func (op *operation) removeRunObjects(ctx context.Context, _ *deleteScope) error {
	// Destroyed, the index names nothing that exists. It goes before the state: a deletion
	// cut short once the run objects went (the controller killed, the run directory not
	// removed) finds nothing to destroy on its retry, not a lost state whose index names
	// resources.
	if op.status().State != nil {
		op.status().State = nil
		if err := op.req.PatchStatus(ctx); err != nil {
			return err
		}
	}
	return op.deleteRunObjects(ctx)
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

// forceDelete removes what the runs kept, the state included, and destroys nothing. A run
// under way is stopped and waited for first: its final save would otherwise write the
// state again after it was deleted.
func (op *operation) forceDelete(ctx context.Context) error {
	if err := op.endRuns(ctx, "", true); err != nil {
		return err
	}
	if err := op.deleteRunObjects(ctx); err != nil {
		return err
	}
	if err := op.deleteEtcdBackup(ctx); err != nil {
		return err
	}
	return op.deleteGeneratedSecret(ctx)
}
