package terraformer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/terraseed/terraseed/terraform/run"
)

func (r *Runner) validate(ctx context.Context) error {
	var out bytes.Buffer
	code, err := r.runTerraform(ctx, &out, validateArgs())
	// An invalid configuration exits 1 and says why in the JSON it writes.
	if err != nil && code != 1 {
		return err
	}
	var validation tfjson.ValidateOutput
	if jsonErr := json.Unmarshal(out.Bytes(), &validation); jsonErr != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("reading the output of terraform validate: %w", jsonErr)
	}
	var blocks []string
	for _, d := range validation.Diagnostics {
		if d.Severity == tfjson.DiagnosticSeverityError {
			blocks = append(blocks, run.DiagnosticBlock(d.Summary, d.Detail))
		}
	}
	if len(blocks) > 0 {
		return run.ErrorOfBlocks(string(run.Validate), blocks, run.ErrTerraformFailed)
	}
	return err
}

// validateArgs are terraform-exec's for validate, whose Validate would start `terraform
// version` first, as its Init does.
func validateArgs() []string { return []string{"validate", "-no-color", "-json"} }
