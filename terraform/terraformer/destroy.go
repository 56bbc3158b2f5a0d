package terraformer

import "context"

// destroy runs `terraform destroy`.
func (r *Runner) destroy(ctx context.Context) error {
	w := r.tracker.writer(planOutput)
	_, err := r.runTerraform(ctx, w, destroyArgs(r.Settings.Parallelism))
	_ = w.Close()
	return err
}

// destroyArgs are those of `terraform destroy`.
func destroyArgs(parallelism int) []string {
	return []string{"destroy", "-no-color", "-auto-approve", "-input=false", "-lock-timeout=0s", "-lock=true", parallelismArg(parallelism), "-refresh=true", "-json"}
}
