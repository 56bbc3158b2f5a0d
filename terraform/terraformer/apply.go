package terraformer

import (
	"context"
	"fmt"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/plan"
)

// guarded says whether an apply must check its plan before applying it: when its state
// holds resources of which some may be of a protected type, or its configuration imports
// resources, which it must not destroy whatever their type. Over a state holding no
// resource, importing none, nothing can be destroyed, and without protected types or
// imports (or with leave to destroy) there is nothing to refuse.
func (r *Runner) guarded() bool {
	return !r.AllowDestroy && (r.imports || r.priorResources && len(r.ProtectedTypes) > 0)
}

// apply applies the configuration. A guarded one plans, publishes the plan, refuses one
// that destroys a protected resource, and applies exactly the plan it checked, or nothing
// when the plan changes nothing; any other is one terraform apply, whose plan is read
// from what it shows before applying.
func (r *Runner) apply(ctx context.Context) error {
	if !r.guarded() {
		err := r.timed(ctx, string(run.Apply), func() error {
			w := r.tracker.writer(planningApplyOutput)
			_, err := r.runTerraform(ctx, w, applyArgs(r.Settings.Parallelism, ""))
			_ = w.Close()
			return err
		})
		if hits := r.tracker.Plan().Destroys(r.ProtectedTypes); len(hits) > 0 {
			logf.FromContext(ctx).Info("destroyedProtectedResources", "changes", len(hits))
		}
		return err
	}
	var changes bool
	err := r.timed(ctx, string(run.Plan), func() error {
		var err error
		changes, err = r.plan(ctx, planFile, true)
		for err != nil {
			dropped, dropErr := r.dropGoneImports(ctx)
			if dropErr != nil {
				logf.FromContext(ctx).Error(dropErr, "recoveredImportsNotRead")
			}
			if !dropped {
				return err
			}
			r.tracker.restartPlan()
			changes, err = r.plan(ctx, planFile, true)
		}
		return err
	})
	if err != nil {
		return err
	}
	if plan := r.tracker.Plan(); len(plan.Destroys(r.ProtectedTypes)) > 0 {
		if r.AllowDestroyPlan == "" || r.AllowDestroyPlan != plan.Digest {
			r.tracker.publishPlan(false)
			return protectedError(plan, r.AllowDestroyPlan, r.ProtectedTypes)
		}
		logf.FromContext(ctx).Info("applyingAllowedPlan", "plan", r.AllowDestroyPlan)
	}
	r.tracker.publishPlan(changes)
	if !changes {
		// Nothing to apply, and so no state to write.
		logf.FromContext(ctx).V(1).Info("nothingToApply")
		return nil
	}
	return r.timed(ctx, string(run.Apply), func() error {
		w := r.tracker.writer(appliedPlanOutput)
		_, err := r.runTerraform(ctx, w, applyArgs(r.Settings.Parallelism, planFile))
		_ = w.Close()
		return err
	})
}

// applyArgs are those of `terraform apply`, of a saved plan when plan is set.
func applyArgs(parallelism int, plan string) []string {
	args := []string{"apply", "-no-color", "-auto-approve", "-input=false", "-lock=true", parallelismArg(parallelism), "-refresh=true", "-json"}
	if plan != "" {
		args = append(args, plan)
	}
	return args
}

// protectedError is the failure of an apply whose plan destroys or replaces resources of
// the protected types; allowed is the digest of the plan that was allowed, if any, which
// is not this one.
func protectedError(summary *plan.Summary, allowed string, protected []string) *run.Error {
	digest := summary.Digest
	message := fmt.Sprintf("%s: %s; nothing was changed", run.ErrDestroyProtected, summary.DestroysListed(protected, 20))
	if allowed != "" {
		message = fmt.Sprintf("%s; the plan allowed was %s, this plan is %s: its configuration or its changes differ", message, allowed, digest)
	}
	return &run.Error{Command: string(run.Apply), Message: message, Protected: true, PlanDigest: digest, Err: run.ErrDestroyProtected}
}
