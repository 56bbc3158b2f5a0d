package terraformer

import (
	"context"
	"fmt"
	"os"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/purge"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/tracing"
)

// purgePhase is the phase of a destroy's purge, timed beside terraform's commands.
const purgePhase = "purge"

// takePurge takes the purge out of the configuration (purge.Key), which only a
// BackupEntry's runs may carry: terraform never sees it.
func (r *Runner) takePurge(files map[string][]byte) error {
	r.purge = nil
	declared, ok := files[purge.Key]
	if !ok {
		return nil
	}
	delete(files, purge.Key)
	field := fmt.Sprintf("ConfigMap %s key %q", r.Objects.ConfigName(), purge.Key)
	if r.Objects.ID.Purpose != purge.Purpose {
		return run.InvalidInput(field, fmt.Sprintf("only the runs of a %s purge, not those of purpose %q", purge.Purpose, r.Objects.ID.Purpose))
	}
	spec, err := purge.Parse(declared)
	if err != nil {
		return run.InvalidInput(field, err.Error())
	}
	r.purge = spec
	return nil
}

// runPurge purges what the configuration names, with the run's credentials, before the
// destroy. It is idempotent: a retried deletion purges what is left.
func (r *Runner) runPurge(ctx context.Context) error {
	if r.purge == nil {
		return nil
	}
	ctx, span := tracing.Start(ctx, "purge")
	defer span.End()
	started := time.Now()
	result, err := purge.Run(ctx, r.purge, r.environ())
	r.phases[purgePhase] = time.Since(started)
	tracing.Fail(span, err)
	if err != nil {
		// Not terraform's error: no command, so that it does not read as one.
		return &run.Error{Message: "before terraform destroy: " + err.Error(), Err: err}
	}
	logf.FromContext(ctx).Info("purged", "bucket", r.purge.Bucket, "prefix", r.purge.Prefix,
		"deleted", result.Deleted, "handedOver", result.HandedOver, "duration", r.phases[purgePhase].Round(time.Millisecond).String())
	return nil
}

// environ is the environment of the run's terraform, where its credentials are.
func (r *Runner) environ() []string {
	if r.Env != nil {
		return r.Env
	}
	return os.Environ()
}
