package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ValidateWithAWSProvider runs terraform validate in dir, a rendered configuration, with
// the hashicorp/aws provider of the filesystem mirror TERRASEED_AWS_PROVIDER_MIRROR (the
// Makefile sets it where the machine has one). Without it the test says so and validates
// nothing: the provider is not among the pinned tools, whose sources serve no build of it.
func ValidateWithAWSProvider(t testing.TB, terraform, dir string) {
	t.Helper()
	mirror := os.Getenv("TERRASEED_AWS_PROVIDER_MIRROR")
	if mirror == "" {
		t.Log("TERRASEED_AWS_PROVIDER_MIRROR is not set: terraform validate with the hashicorp/aws provider is skipped")
		return
	}
	config := filepath.Join(t.TempDir(), "terraform.rc")
	rc := fmt.Appendf(nil, "disable_checkpoint = true\nprovider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", mirror)
	if err := os.WriteFile(config, rc, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{{"init", "-backend=false", "-input=false", "-no-color"}, {"validate", "-no-color"}} {
		cmd := exec.Command(terraform, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+config, "TF_DATA_DIR="+data)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
		}
	}
}
