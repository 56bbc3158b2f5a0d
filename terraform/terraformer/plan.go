package terraformer

import (
	"context"
	"strconv"
)

// plan runs `terraform plan`, saving the plan to out when set, and says whether it found
// changes.
func (r *Runner) plan(ctx context.Context, out string, lock bool) (bool, error) {
	w := r.tracker.writer(planOutput)
	code, err := r.runTerraform(ctx, w, planArgs(r.Settings.Parallelism, out, lock))
	_ = w.Close()
	if code == exitChanges {
		return true, nil
	}
	return false, err
}

// planArgs are those of `terraform plan`: -detailed-exitcode, so that its exit code says
// whether it found changes; out, when set, is where it saves the plan.
func planArgs(parallelism int, out string, lock bool) []string {
	args := []string{"plan", "-no-color", "-input=false", "-detailed-exitcode", "-lock-timeout=0s", "-lock=" + strconv.FormatBool(lock)}
	if out != "" {
		args = append(args, "-out="+out)
	}
	return append(args, parallelismArg(parallelism), "-refresh=true", "-json")
}

// exitChanges is the exit code of `terraform plan -detailed-exitcode` that found changes.
const exitChanges = 2

// planFile is where an apply keeps its plan; writeFiles removes it before the next run.
const planFile = "terraseed.tfplan"
