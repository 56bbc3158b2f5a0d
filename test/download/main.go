// Command download installs the official release binaries of the tools that
// test/tools/bootstrap.sh would otherwise build from source, at the pinned versions:
//
//	download terraform -version 1.5.7 -out DIR
//	download envtest -version 1.37.1 -etcd-version 3.7.0 -out DIR
//
// terraform comes from HashiCorp's releases through hc-install, which checks the
// signature of the release's SHA256SUMS against HashiCorp's public key and the archive
// against that file. kube-apiserver and etcd come from the envtest binaries' index
// through setup-envtest's library, which checks the archive against the SHA-512 the index
// gives for it. Each binary's reported version is checked against the pinned one; an
// envtest archive whose etcd is another version installs kube-apiserver alone (exit 0),
// for the caller to build etcd.
//
// It first probes the source with one request bounded by -probe-timeout (5s), so that a
// machine that cannot reach it learns so in seconds. Exit status: 0 installed, 3 the
// source did not answer the probe, 1 any other failure (among them a checksum that does
// not match: nothing is installed then). bootstrap.sh builds from source on any failure.
//
// Environment, for a mirror and for the tests:
//
//	TERRASEED_RELEASES_URL   HashiCorp's releases (https://releases.hashicorp.com)
//	TERRASEED_RELEASES_KEY   a file holding the armored PGP public key that signs the
//	                         releases' checksums, instead of HashiCorp's own
//	TERRASEED_ENVTEST_INDEX  the envtest binaries' index (setup-envtest's default)
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hc-install/product"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/remote"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/store"
	"sigs.k8s.io/controller-runtime/tools/setup-envtest/versions"

	"github.com/terraseed/terraseed/build/release"
)

// Options says what to install where, and from where.
type Options struct {
	Version      string
	EtcdVersion  string
	Out          string
	ProbeTimeout time.Duration
	// Timeout bounds the whole download.
	Timeout time.Duration

	ReleasesURL  string
	ReleasesKey  string // armored; empty: HashiCorp's key, built into hc-install
	EnvtestIndex string
}

func main() {
	code, err := run(context.Background(), os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "download:", err)
	}
	os.Exit(code)
}

// run is the command: it returns the exit status and the error that explains it.
func run(ctx context.Context, args []string, getenv func(string) string) (int, error) {
	if len(args) == 0 {
		return 2, errors.New("usage: download terraform|envtest -version V [-etcd-version V] -out DIR")
	}
	what := args[0]
	fs := flag.NewFlagSet("download "+what, flag.ContinueOnError)
	o := Options{
		ReleasesURL:  strings.TrimSuffix(getenv("TERRASEED_RELEASES_URL"), "/"),
		EnvtestIndex: getenv("TERRASEED_ENVTEST_INDEX"),
	}
	fs.StringVar(&o.Version, "version", "", "the version to install")
	fs.StringVar(&o.EtcdVersion, "etcd-version", "", "envtest: the etcd version to keep")
	fs.StringVar(&o.Out, "out", "", "the directory to install into")
	fs.DurationVar(&o.ProbeTimeout, "probe-timeout", 5*time.Second, "how long the source may take to answer its first request")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "how long the whole download may take")
	if err := fs.Parse(args[1:]); err != nil {
		return 2, err
	}
	if o.Version == "" || o.Out == "" {
		return 2, errors.New("-version and -out are required")
	}
	if path := getenv("TERRASEED_RELEASES_KEY"); path != "" {
		key, err := os.ReadFile(path)
		if err != nil {
			return 1, err
		}
		o.ReleasesKey = string(key)
	}

	var err error
	switch what {
	case "terraform":
		err = Terraform(ctx, o)
	case "envtest":
		err = Envtest(ctx, o)
	default:
		return 2, fmt.Errorf("unknown tool %q: terraform or envtest", what)
	}
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, release.ErrUnreachable):
		return 3, err
	default:
		return 1, err
	}
}

// Terraform installs terraform o.Version into o.Out.
func Terraform(ctx context.Context, o Options) error {
	v, err := version.NewVersion(o.Version)
	if err != nil {
		return err
	}
	// hc-install unpacks into InstallDir, which it removes again when the install fails.
	tmp, err := os.MkdirTemp(o.Out, ".terraform-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	site := release.Site{URL: o.ReleasesURL, Key: o.ReleasesKey, ProbeTimeout: o.ProbeTimeout, Timeout: o.Timeout}
	path, err := site.Install(ctx, product.Terraform, v, tmp)
	if err != nil {
		return err
	}
	if err := checkVersion(ctx, path, "Terraform v"+v.String(), "version"); err != nil {
		return err
	}
	return os.Rename(path, filepath.Join(o.Out, "terraform"))
}

// Envtest installs kube-apiserver o.Version into o.Out, and etcd when the archive's is
// o.EtcdVersion.
// It is long because it is setup-envtest's one sequence (index, archive with its checksum,
// unpack into a scratch store) and a version check of each binary it keeps.
func Envtest(ctx context.Context, o Options) error {
	var want versions.Concrete
	if _, err := fmt.Sscanf(o.Version, "%d.%d.%d", &want.Major, &want.Minor, &want.Patch); err != nil {
		return fmt.Errorf("version %q: %w", o.Version, err)
	}
	index := o.EnvtestIndex
	if index == "" {
		index = remote.DefaultIndexURL
	}
	if err := release.Probe(ctx, index, o.ProbeTimeout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ctx = logr.NewContext(ctx, logr.Discard())

	client := &remote.HTTPClient{IndexURL: index, Log: logr.Discard()}
	item := versions.PlatformItem{Platform: versions.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}}
	if err := client.FetchSum(ctx, want, &item); err != nil {
		return fmt.Errorf("envtest %s: %w", want, err)
	}
	if item.Hash == nil || item.Hash.Value == "" {
		// Without a checksum the library would accept any archive.
		return fmt.Errorf("envtest %s: the index gives no checksum for %s", want, item.Platform)
	}
	var archive bytes.Buffer
	if err := client.GetVersion(ctx, want, item, &archive); err != nil {
		return fmt.Errorf("envtest %s: %w", want, err)
	}

	tmp, err := os.MkdirTemp(o.Out, ".envtest-")
	if err != nil {
		return err
	}
	defer func() {
		// The store makes what it unpacked read-only.
		_ = filepath.Walk(tmp, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
		_ = os.RemoveAll(tmp)
	}()
	st := store.NewAt(tmp)
	if err := st.Initialize(ctx); err != nil {
		return err
	}
	sitem := store.Item{Version: want, Platform: item.Platform}
	if err := st.Add(ctx, sitem, &archive); err != nil {
		return fmt.Errorf("envtest %s: %w", want, err)
	}
	dir, err := st.Path(sitem)
	if err != nil {
		return err
	}

	apiserver := filepath.Join(dir, "kube-apiserver")
	if err := checkVersion(ctx, apiserver, "Kubernetes v"+o.Version, "--version"); err != nil {
		return err
	}
	install := []string{"kube-apiserver"}
	if o.EtcdVersion != "" {
		etcd := filepath.Join(dir, "etcd")
		if err := checkVersion(ctx, etcd, "etcd Version: "+o.EtcdVersion, "--version"); err != nil {
			fmt.Fprintf(os.Stderr, "download: keeping kube-apiserver only: %v\n", err)
		} else {
			install = append(install, "etcd")
		}
	}
	for _, name := range install {
		if err := release.CopyExecutable(filepath.Join(dir, name), filepath.Join(o.Out, name)); err != nil {
			return err
		}
	}
	return nil
}

// checkVersion runs the binary with args and requires want in what it prints.
func checkVersion(ctx context.Context, path, want string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1") // terraform: no update check
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, out)
	}
	if !strings.Contains(string(out), want) {
		return fmt.Errorf("%s reports %q, not %q", filepath.Base(path), strings.TrimSpace(string(out)), want)
	}
	return nil
}
