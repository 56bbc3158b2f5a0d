package terraformer

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-version"

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
	if err := wrongVersion(r.Settings.Terraform, r.Settings.OpenTofu, v.String()); err != nil {
		return wrapNotFound(err)
	}
	identity := binaryIdentity(r.Settings.Terraform, r.Settings.OpenTofu)
	checkedBinaries.Store(identity, true)
	record := filepath.Join(r.WorkDir, versionRecord)
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return err
	}
	return os.WriteFile(record, []byte(identity), 0o600)
}

// wrongVersion names the binary at path and the version it is, when that is not the
// pinned version of terraform (or of OpenTofu).
func wrongVersion(path string, openTofu bool, v string) error {
	product, want := pinned(openTofu)
	if v != want {
		return fmt.Errorf("%s is %s %s, not %s", path, product, v, want)
	}
	return nil
}

// The modules terraform and OpenTofu are built from, which their binaries' Go build
// information names.
const (
	terraformModule = "github.com/hashicorp/terraform"
	openTofuModule  = "github.com/opentofu/opentofu"
)

// checkBuiltVersion checks the binary at path by its Go build information, which names
// the module and the release the binary was built from (`go install
// github.com/hashicorp/terraform@v1.5.7`, as the image builds it): reading it from the
// file costs a fraction of a millisecond, where starting the binary to ask costs a
// process of some 90 MB, tens of milliseconds of a run pod's start. known is false when
// the build information names no release of terraform or OpenTofu (not a Go binary,
// another module, a build of a checkout or of changed sources, HashiCorp's release
// archives): the binary must then be asked.
func checkBuiltVersion(path string, openTofu bool) (known bool, err error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return false, nil
	}
	product := ""
	switch info.Main.Path {
	case terraformModule:
		product = "terraform"
	case openTofuModule:
		product = "OpenTofu"
	default:
		return false, nil
	}
	// A release: neither a pseudo-version (a pre-release) nor a build of changed sources
	// ("+dirty", build metadata).
	v, err := version.NewSemver(info.Main.Version)
	if err != nil || v.Prerelease() != "" || v.Metadata() != "" || !strings.HasPrefix(info.Main.Version, "v") {
		return false, nil
	}
	if wantProduct, want := pinned(openTofu); product != wantProduct {
		return true, fmt.Errorf("%s is %s %s, not %s %s", path, product, v, wantProduct, want)
	}
	return true, wrongVersion(path, openTofu, v.String())
}

// pinned is the binary a run wants: terraform of TerraformVersion, or OpenTofu of
// OpenTofuVersion.
func pinned(openTofu bool) (product, version string) {
	if openTofu {
		return "OpenTofu", OpenTofuVersion
	}
	return "terraform", TerraformVersion
}

// versionRecord is where a working directory records the binary whose version a run
// checked: the next run of the same binary there need not start it to ask.
const versionRecord = ".terraform/terraseed-version-checked"

// versionChecked says whether a run checked the version of this very binary (path, size,
// modification time, and the version wanted) in this process or in the working directory
// before.
func (r *Runner) versionChecked() bool {
	identity := binaryIdentity(r.Settings.Terraform, r.Settings.OpenTofu)
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

// binaryIdentity names the binary at path as it is now, as terraform or OpenTofu: its
// path, inode, size, and its modification and change times; empty when it cannot be
// read. Whatever replaces or writes the file changes its change time, which no one can
// set back.
func binaryIdentity(path string, openTofu bool) string {
	info, err := os.Stat(path)
	if err != nil {
		return ""
	}
	var inode uint64
	var changed int64
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		inode, changed = st.Ino, st.Ctim.Nano()
	}
	return fmt.Sprintf("%s\x00%d\x00%d\x00%d\x00%d\x00%t\x00%s/%s", path, inode, info.Size(), info.ModTime().UnixNano(), changed, openTofu, TerraformVersion, OpenTofuVersion)
}

// TerraformVersion is the pinned terraform version: the last MPL release.
const TerraformVersion = "1.5.7"

// OpenTofuVersion is the pinned OpenTofu version, the alternative binary.
const OpenTofuVersion = "1.10.10"

// wrapNotFound marks the refusal of a binary, err, as errTerraformNotFound; nil stays nil.
func wrapNotFound(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errTerraformNotFound, err)
}
