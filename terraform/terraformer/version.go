package terraformer

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/terraform-exec/tfexec"
)

// checkVersion refuses a binary of another version, and records a binary it accepted in
// the working directory. `terraform version` is the one command terraform-exec runs.
func (r *Runner) checkVersion(ctx context.Context) error {
	tf, err := tfexec.NewTerraform(r.WorkDir, r.Settings.Terraform)
	if err != nil {
		return fmt.Errorf("preparing terraform: %w", err)
	}
	// Its JSON is of no interest in the run's output.
	tf.SetStdout(io.Discard)
	tf.SetStderr(r.stderr)
	if err := tf.SetWaitDelay(r.Settings.stopTimeout()); err != nil {
		return err
	}
	// It reads no variables: terraform-exec refuses to be given TF_VAR_* and the like,
	// and sets what it sets itself.
	if err := setEnv(tf, r.terraformEnv(), "TF_CLI_CONFIG_FILE", r.cliConfig); err != nil {
		return err
	}
	v, _, err := tf.Version(ctx, false)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errTerraformNotFound, r.Settings.Terraform, err)
	}
	want, binary := TerraformVersion, "terraform"
	if r.Settings.OpenTofu {
		want, binary = OpenTofuVersion, "OpenTofu"
	}
	if v.String() != want {
		return fmt.Errorf("%w: %s is %s %s, not %s", errTerraformNotFound, r.Settings.Terraform, binary, v, want)
	}
	identity := r.binaryIdentity()
	checkedBinaries.Store(identity, true)
	record := filepath.Join(r.WorkDir, versionRecord)
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return err
	}
	return os.WriteFile(record, []byte(identity), 0o600)
}

// versionRecord is where a working directory records the binary whose version a run
// checked: the next run of the same binary there need not start it to ask.
const versionRecord = ".terraform/terraseed-version-checked"

// versionChecked says whether a run checked the version of this very binary (path, size,
// modification time, and the version wanted) in this process or in the working directory
// before.
func (r *Runner) versionChecked() bool {
	identity := r.binaryIdentity()
	if identity == "" {
		return false
	}
	if _, ok := checkedBinaries.Load(identity); ok {
		return true
	}
	recorded, err := os.ReadFile(filepath.Join(r.WorkDir, versionRecord))
	return err == nil && string(recorded) == identity
}

// checkedBinaries are the identities of the binaries whose version a run of this process
// checked: the runs of the local executor share the controller's process, and a create
// in a new working directory need not ask a binary again that an earlier run asked.
var checkedBinaries sync.Map

// binaryIdentity names the binary at Settings.Terraform as it is now; empty when it cannot be read.
func (r *Runner) binaryIdentity() string {
	info, err := os.Stat(r.Settings.Terraform)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s\x00%d\x00%d\x00%t\x00%s/%s", r.Settings.Terraform, info.Size(), info.ModTime().UnixNano(), r.Settings.OpenTofu, TerraformVersion, OpenTofuVersion)
}

// TerraformVersion is the pinned terraform version: the last MPL release.
const TerraformVersion = "1.5.7"

// OpenTofuVersion is the pinned OpenTofu version, the alternative binary.
const OpenTofuVersion = "1.10.10"
