package terraformer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
)

// plugins carries the runner's use of Plugins: the CLI configuration and the cache lock.
type plugins Plugins

// cliConfig renders a terraform CLI configuration that installs the mirror's providers
// only from the mirror, through the shared cache.
func (p plugins) cliConfig() (string, error) {
	var b strings.Builder
	// Otherwise every `terraform version`, which each run makes, waits for a request to
	// checkpoint-api.hashicorp.com, up to seconds where a seed blocks it.
	b.WriteString("disable_checkpoint = true\n")
	// An unpacked mirror is linked into each working directory as it is, in no time and
	// with nothing to share; the cache only serves providers that are downloaded. Through
	// the cache, one run's init replaced the entry another run's apply was starting its
	// provider from.
	if p.usesCache() {
		fmt.Fprintf(&b, "plugin_cache_dir = %s\n", strconv.Quote(p.CacheDir))
		// The mirror is the trusted source, so a cached copy of it may complete a lock file.
		b.WriteString("plugin_cache_may_break_dependency_lock_file = true\n")
	}
	b.WriteString("provider_installation {\n")
	if p.Mirror != "" {
		fmt.Fprintf(&b, "  filesystem_mirror {\n    path = %s\n  }\n", strconv.Quote(p.Mirror))
	}
	if p.AllowDownload {
		mirrored, err := mirroredProviders(p.Mirror)
		if err != nil {
			return "", err
		}
		b.WriteString("  direct {\n")
		if len(mirrored) > 0 {
			quoted := make([]string, len(mirrored))
			for i, m := range mirrored {
				quoted[i] = strconv.Quote(m)
			}
			fmt.Fprintf(&b, "    exclude = [%s]\n", strings.Join(quoted, ", "))
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// mirroredProviders lists the providers (host/namespace/type) of an unpacked filesystem mirror.
func mirroredProviders(mirror string) ([]string, error) {
	if mirror == "" {
		return nil, nil
	}
	dirs, err := filepath.Glob(filepath.Join(mirror, "*", "*", "*"))
	if err != nil {
		return nil, err
	}
	var providers []string
	for _, dir := range dirs {
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			rel, _ := filepath.Rel(mirror, dir)
			providers = append(providers, filepath.ToSlash(rel))
		}
	}
	return providers, nil
}

// writeCLIConfig writes the CLI configuration into dir and returns its path.
func (p plugins) writeCLIConfig(dir string) (string, error) {
	config, err := p.cliConfig()
	if err != nil {
		return "", err
	}
	if p.usesCache() {
		if err := os.MkdirAll(p.CacheDir, 0o755); err != nil {
			return "", fmt.Errorf("creating the plugin cache: %w", err)
		}
	}
	path := filepath.Join(dir, ".terraformrc")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return "", fmt.Errorf("writing the terraform CLI configuration: %w", err)
	}
	return path, nil
}

// lockCache holds an exclusive lock on the plugin cache, because terraform does not
// guard its cache against concurrent `terraform init`s filling it.
func (p plugins) lockCache(ctx context.Context) (func(), error) {
	if !p.usesCache() {
		return func() {}, nil
	}
	lock := flock.New(filepath.Join(p.CacheDir, ".terraseed.lock"))
	locked, err := lock.TryLockContext(ctx, 50*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("locking the plugin cache: %w", err)
	}
	if !locked {
		return nil, fmt.Errorf("locking the plugin cache: %w", ctx.Err())
	}
	return func() { _ = lock.Unlock() }, nil
}

func (p plugins) usesCache() bool { return p.CacheDir != "" && (p.AllowDownload || p.Mirror == "") }
