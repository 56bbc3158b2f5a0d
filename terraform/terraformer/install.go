package terraformer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-version"
	install "github.com/hashicorp/hc-install"
	"github.com/hashicorp/hc-install/product"
	"github.com/hashicorp/hc-install/releases"
	"github.com/hashicorp/hc-install/src"
	"github.com/hashicorp/terraform-exec/tfexec"
)

// errTerraformNotFound is returned when no terraform of the pinned version is installed
// and installing one was not allowed.
var errTerraformNotFound = errors.New("terraform " + TerraformVersion + " is not installed")

// versionCheckTimeout bounds one `terraform version`: with the update check off it
// answers in milliseconds, so only a binary that hangs reaches it.
const versionCheckTimeout = time.Minute

// FindTerraform returns the path of a terraform binary of the pinned version: the given
// path as it is, else the first one on PATH, and one installed from releases into
// installDir only when allowDownload is set.
//
// The binaries are asked for their version here rather than by hc-install's file
// source: that one asks with the process's environment, so each terraform on PATH asks
// HashiCorp for updates first (up to 3 s each where the network drops the request, all
// of them within its 10 s), and it drops the reason a binary was refused.
func FindTerraform(ctx context.Context, path string, allowDownload bool, installDir string) (string, error) {
	if path != "" {
		if err := checkTerraformVersion(ctx, path); err != nil {
			return "", fmt.Errorf("%w: %w", errTerraformNotFound, err)
		}
		return path, nil
	}
	var refused []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		candidate := filepath.Join(cmp.Or(dir, "."), "terraform") // an empty element is the current directory, as in a shell
		if info, err := os.Stat(candidate); err != nil || info.IsDir() {
			continue
		}
		err := checkTerraformVersion(ctx, candidate)
		if err == nil {
			return filepath.Abs(candidate)
		}
		refused = append(refused, err.Error())
	}
	if !allowDownload {
		found := "none on PATH"
		if len(refused) > 0 {
			found = strings.Join(refused, "; ")
		}
		return "", fmt.Errorf("%w (%s; name it with --terraform, or allow installing from releases to download it)", errTerraformNotFound, found)
	}
	v := version.Must(version.NewVersion(TerraformVersion))
	execPath, err := install.NewInstaller().Ensure(ctx, []src.Source{&releases.ExactVersion{Product: product.Terraform, Version: v, InstallDir: installDir}})
	if err != nil {
		return "", fmt.Errorf("installing terraform %s: %w", TerraformVersion, err)
	}
	return execPath, nil
}

// checkTerraformVersion asks the binary for its version with the update check off, and
// refuses one of another version, naming the version it is.
func checkTerraformVersion(ctx context.Context, path string) error {
	if known, err := checkBuiltVersion(path, false); known {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, versionCheckTimeout)
	defer cancel()
	tf, err := tfexec.NewTerraform(os.TempDir(), path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := setEnv(tf, os.Environ(), "CHECKPOINT_DISABLE", "1"); err != nil {
		return err
	}
	v, _, err := tf.Version(ctx, true)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: `version` did not answer within %s", path, versionCheckTimeout)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := wrongVersion(path, false, v.String()); err != nil {
		return err
	}
	// The run of this binary in this process need not ask it again.
	if abs, err := filepath.Abs(path); err == nil {
		checkedBinaries.Store(binaryIdentity(abs, false), true)
	}
	return nil
}
