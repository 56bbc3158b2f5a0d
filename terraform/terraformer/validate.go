package terraformer

import (
	"context"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/terraseed/terraseed/terraform/run"
)

func (r *Runner) validate(ctx context.Context, tf *tfexec.Terraform) error {
	out, err := tf.Validate(ctx)
	if err != nil {
		return err
	}
	var blocks []string
	for _, d := range out.Diagnostics {
		if d.Severity == "error" {
			blocks = append(blocks, run.DiagnosticBlock(d.Summary, d.Detail))
		}
	}
	if len(blocks) > 0 {
		return run.ErrorOfBlocks(string(run.Validate), blocks, run.ErrTerraformFailed)
	}
	return nil
}
