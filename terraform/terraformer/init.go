package terraformer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// initRecord is where a working directory records what it was initialised for. It lives in
// terraform's data directory, so that it goes with what it describes.
const initRecord = ".terraform/terraseed-initialised"

// init runs terraform init unless the working directory was initialised for the same
// configuration files, lock file, CLI configuration and binary by an earlier run that
// succeeded: init would then change nothing, and costs a terraform process.
func (r *Runner) init(ctx context.Context) error {
	record := filepath.Join(r.WorkDir, initRecord)
	digest, err := r.initDigest()
	if err != nil {
		return err
	}
	if recorded, err := os.ReadFile(record); err == nil && string(recorded) == digest {
		logf.FromContext(ctx).V(1).Info("initialisedAlready")
		return nil
	}
	forgetInit(r.WorkDir)
	err = r.timed(ctx, "init", func() error {
		unlock, err := plugins(r.Settings.Plugins).lockCache(ctx)
		if err != nil {
			return err
		}
		defer unlock()
		_, err = r.runTerraform(ctx, orDiscard(r.Stdout), initArgs())
		return err
	})
	if err != nil {
		return err
	}
	// init wrote the lock file the digest covers.
	if digest, err = r.initDigest(); err != nil {
		return err
	}
	// A configuration without providers or modules leaves no data directory behind.
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return err
	}
	return os.WriteFile(record, []byte(digest), 0o600)
}

// initArgs are terraform-exec's defaults for init. terraform-exec's own Init would start
// `terraform version` first, in each new working directory, to choose its flags: 20 ms,
// 2.5% of a create.
func initArgs() []string {
	return []string{"init", "-no-color", "-input=false", "-backend=true", "-get=true", "-upgrade=false"}
}

// forgetInit has the next run of dir initialise it.
func forgetInit(dir string) { _ = os.Remove(filepath.Join(dir, initRecord)) }

// initDigest covers what terraform init reads: the binary, the CLI configuration (the
// plugin mirror and cache), the configuration files (providers, modules, backend) and the
// dependency lock file; not the variables, which init does not read.
func (r *Runner) initDigest() (string, error) {
	files, err := filepath.Glob(filepath.Join(r.WorkDir, "*.tf"))
	if err != nil {
		return "", err
	}
	jsonFiles, err := filepath.Glob(filepath.Join(r.WorkDir, "*.tf.json"))
	if err != nil {
		return "", err
	}
	files = append(files, jsonFiles...)
	slices.Sort(files)
	files = append(files, filepath.Join(r.WorkDir, ".terraform.lock.hcl"), r.cliConfig)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", binaryIdentity(r.Settings.Terraform, r.Settings.OpenTofu))
	for _, path := range files {
		content, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(path), len(content))
		h.Write(content)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
