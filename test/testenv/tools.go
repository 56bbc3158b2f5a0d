package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Terraform returns the path of the pinned terraform binary that `make tools` built.
func Terraform(t testing.TB) string {
	t.Helper()
	return requireEnvFile(t, "TERRASEED_TERRAFORM")
}

// ProviderMirror returns the terraform filesystem mirror holding the pinned providers.
func ProviderMirror(t testing.TB) string {
	t.Helper()
	return requireEnvFile(t, "TERRASEED_PROVIDER_MIRROR")
}

// TerraformCLIConfig writes a terraform CLI configuration that installs providers only
// from the mirror, and returns its path. Tests point TF_CLI_CONFIG_FILE at it, never at
// the machine's own configuration.
func TerraformCLIConfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "terraform.rc")
	config := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", ProviderMirror(t))
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func requireEnvFile(t testing.TB, name string) string {
	t.Helper()
	path := os.Getenv(name)
	if path == "" {
		t.Fatalf("%s is not set: run the tests with `make test`, or `make tools` and `eval \"$(make -s env)\"` first", name)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s=%s: %v (run `make tools`)", name, path, err)
	}
	return path
}
