package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Terraform returns the path of the pinned terraform binary that `make tools` built.
func Terraform(t testing.TB) string {
	t.Helper()
	return requireEnvFile(t, "TERRASEED_TERRAFORM")
}

// OpenTofu returns the path of the pinned OpenTofu binary that `make tools` built.
func OpenTofu(t testing.TB) string {
	t.Helper()
	return requireEnvFile(t, "TERRASEED_TOFU")
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
	config := fmt.Sprintf("disable_checkpoint = true\nprovider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", ProviderMirror(t))
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

var terraformer struct {
	once sync.Once
	path string
	err  error
}

// TerraformerBinary builds cmd/terraformer, the entrypoint of run pods, once per test
// process and returns its path, so that runs in tests start what the image starts.
func TerraformerBinary(t testing.TB) string {
	t.Helper()
	terraformer.once.Do(func() {
		dir, err := os.MkdirTemp("", "terraseed-terraformer-")
		if err != nil {
			terraformer.err = err
			return
		}
		terraformer.path = filepath.Join(dir, "terraformer")
		build := exec.Command("go", "build", "-o", terraformer.path, "./cmd/terraformer")
		build.Dir = moduleRoot()
		if out, err := build.CombinedOutput(); err != nil {
			terraformer.err = fmt.Errorf("building cmd/terraformer: %w\n%s", err, out)
		}
	})
	if terraformer.err != nil {
		t.Fatal(terraformer.err)
	}
	return terraformer.path
}

// removeBuilt deletes what TerraformerBinary built.
func removeBuilt() {
	if terraformer.path != "" {
		_ = os.RemoveAll(filepath.Dir(terraformer.path))
	}
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
