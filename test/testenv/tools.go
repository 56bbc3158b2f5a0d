package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// built is a command of this module built once per test process.
type built struct {
	pkg  string
	once sync.Once
	path string
	err  error
}

var (
	terraformer = &built{pkg: "terraformer"}
	controller  = &built{pkg: "terraseed"}
)

// TerraformerBinary builds cmd/terraformer, the entrypoint of run pods, once per test
// process and returns its path, so that runs in tests start what the image starts.
func TerraformerBinary(t testing.TB) string { return terraformer.binary(t) }

// ControllerBinary builds cmd/terraseed once per test process and returns
// its path, for tests of what the process does as a whole (signals, restarts, kills).
func ControllerBinary(t testing.TB) string { return controller.binary(t) }

func (b *built) binary(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		prefix := "terraseed-" + b.pkg + "-"
		removeAbandoned(prefix)
		dir, err := os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.pkg)
		build := exec.Command("go", "build", "-o", b.path, "./cmd/"+b.pkg)
		// Static, as the image's: with cgo, the plugin package kustomize brings in (through
		// fluxcd/pkg/ssa) exports every symbol of a dynamically linked binary, 36 MB more
		// of it mapped into the process, which the controller in its image never has.
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Dir = moduleRoot()
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building cmd/%s: %w\n%s", b.pkg, err, out)
			return
		}
		b.err = dropFromPageCache(b.path)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// dropFromPageCache has the kernel forget the pages of the file at path, so that the
// processes started from it read it from disk, as a pod's container reads its image: the
// pages the linker wrote are mapped into a process in larger pieces than those read, and
// held the controller's resident memory 5 MB above a process started from disk.
func dropFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// removeAbandoned deletes the builds of test processes that are gone without removing
// them (killed, or stopped at a timeout): each is some 100 MB, and they would fill the
// machine's temporary directory over many runs.
func removeAbandoned(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*-*"))
	for _, dir := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), prefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// removeBuilt deletes what TerraformerBinary and ControllerBinary built.
func removeBuilt() {
	for _, b := range []*built{terraformer, controller} {
		if b.path != "" {
			_ = os.RemoveAll(filepath.Dir(b.path))
		}
	}
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
