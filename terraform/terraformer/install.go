package terraformer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/go-version"
	install "github.com/hashicorp/hc-install"
	"github.com/hashicorp/hc-install/fs"
	"github.com/hashicorp/hc-install/product"
	"github.com/hashicorp/hc-install/releases"
	"github.com/hashicorp/hc-install/src"
)

// errTerraformNotFound is returned when no terraform of the pinned version is installed
// and installing one was not allowed.
var errTerraformNotFound = errors.New("terraform " + TerraformVersion + " is not installed")

// FindTerraform returns the path of a terraform binary of the pinned version: the given
// path or one on PATH first, and one installed from releases into installDir only when
// allowDownload is set.
func FindTerraform(ctx context.Context, path string, allowDownload bool, installDir string) (string, error) {
	v := version.Must(version.NewVersion(TerraformVersion))
	var extra []string
	if path != "" {
		extra = append(extra, filepath.Dir(path))
	}
	sources := []src.Source{&fs.ExactVersion{Product: product.Terraform, Version: v, ExtraPaths: extra}}
	if allowDownload {
		sources = append(sources, &releases.ExactVersion{Product: product.Terraform, Version: v, InstallDir: installDir})
	}
	execPath, err := install.NewInstaller().Ensure(ctx, sources)
	if err != nil {
		if !allowDownload {
			return "", fmt.Errorf("%w (looked in %v and PATH; allow installing from releases to download it): %v", errTerraformNotFound, extra, err)
		}
		return "", fmt.Errorf("installing terraform %s: %w", TerraformVersion, err)
	}
	return execPath, nil
}
