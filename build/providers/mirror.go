package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hc-install/product"

	"github.com/terraseed/terraseed/build/release"
)

// Mirror places providers in Dir in terraform's unpacked filesystem-mirror layout:
//
//	Dir/<host>/<namespace>/<type>/<version>/<os>_<arch>/terraform-provider-<type>_...
//
// HashiCorp's providers come as their official release archives, every other provider
// is built from its Go module.
type Mirror struct {
	Dir  string
	Site release.Site
	// SkipUnreachable leaves out a provider whose releases site does not answer, and says
	// so, instead of failing: for assembling the image on a machine that cannot reach it.
	SkipUnreachable bool
	// Log receives a line for every provider mirrored or left out.
	Log io.Writer
}

// Add mirrors p. It reports whether p was left out because its source was not reachable.
func (m Mirror) Add(ctx context.Context, p Provider) (leftOut bool, err error) {
	dir := filepath.Join(m.Dir, p.Host, p.Namespace, p.Type, p.Version, runtime.GOOS+"_"+runtime.GOARCH)
	if p.Host == DefaultHost && p.Namespace == "hashicorp" && p.Module == "" {
		err := m.download(ctx, p, dir)
		if errors.Is(err, release.ErrUnreachable) && m.SkipUnreachable {
			fmt.Fprintf(m.Log, "left out %s %s: %v\n", p.Source(), p.Version, err)
			return true, nil
		}
		return false, err
	}
	return false, m.build(ctx, p, dir)
}

// download installs p's release archive's binary into dir, which it creates only when
// the archive's checksum and the checksums' signature were verified.
func (m Mirror) download(ctx context.Context, p Provider, dir string) error {
	v, err := version.NewVersion(p.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	tmp, err := os.MkdirTemp("", "terraform-provider-"+p.Type+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	binary := "terraform-provider-" + p.Type
	prod := product.Product{
		Name: binary,
		// The archive's binary carries the plugin protocol it speaks
		// (terraform-provider-aws_v5.100.0_x5), which the release's index does not say:
		// hc-install asks for the name after it unpacked the archive.
		BinaryName: func() string { return unpacked(tmp, binary) },
	}
	path, err := m.Site.Install(ctx, prod, v, tmp)
	if err != nil {
		return err
	}
	if err := release.CopyExecutable(path, filepath.Join(dir, filepath.Base(path))); err != nil {
		return err
	}
	fmt.Fprintf(m.Log, "mirrored %s %s: the release archive from %s\n", p.Source(), p.Version, siteName(m.Site))
	return nil
}

// unpacked names the file in dir whose name starts with prefix (the name itself when none).
func unpacked(dir, prefix string) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			return e.Name()
		}
	}
	return prefix
}

func siteName(s release.Site) string {
	if s.URL == "" {
		return release.DefaultURL
	}
	return s.URL
}

// build builds p from its Go module into dir as test/tools/bootstrap.sh builds the
// provider the tests run against (the same command, environment and flags, outside any
// module), so that the image holds that build byte for byte.
func (m Mirror) build(ctx context.Context, p Provider, dir string) error {
	module := p.Module
	if module == "" {
		module = "github.com/" + p.Namespace + "/terraform-provider-" + p.Type + "@v" + p.Version
	}
	bin, err := os.MkdirTemp("", "terraform-provider-"+p.Type+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	cmd := exec.CommandContext(ctx, "go", "install", module)
	cmd.Dir = bin
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: go install %s: %w\n%s", p, module, err, out)
	}
	entries, err := os.ReadDir(bin)
	if err != nil {
		return err
	}
	if len(entries) != 1 {
		return fmt.Errorf("%s: go install %s left %d files, want its one binary", p, module, len(entries))
	}
	if err := release.CopyExecutable(filepath.Join(bin, entries[0].Name()), filepath.Join(dir, "terraform-provider-"+p.Type+"_v"+p.Version)); err != nil {
		return err
	}
	fmt.Fprintf(m.Log, "mirrored %s %s: built from %s\n", p.Source(), p.Version, module)
	return nil
}
