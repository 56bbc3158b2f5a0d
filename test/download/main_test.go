package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/terraseed/terraseed/build/release/releasetest"
)

const (
	tfVersion   = "1.5.7"
	kubeVersion = "1.37.1"
	etcdVersion = "3.7.0"
)

// script is an executable that prints what the real binary prints for its version.
func script(output string) []byte {
	return []byte("#!/bin/sh\ncat <<'EOF'\n" + output + "\nEOF\n")
}

var (
	terraformBinary = script("Terraform v" + tfVersion + "\non " + runtime.GOOS + "_" + runtime.GOARCH)
	apiserverBinary = script("Kubernetes v" + kubeVersion)
	etcdBinary      = script("etcd Version: " + etcdVersion + "\nGit SHA: Not provided (use ./build instead of go build)")
)

// newReleaseServer serves terraform's release, signed by signer; sums, when set,
// replaces the true SHA256SUMS.
func newReleaseServer(t *testing.T, signer *openpgp.Entity, binary []byte, sums string) *releasetest.Server {
	t.Helper()
	return releasetest.NewServer(t, signer, terraformRelease(binary, sums))
}

func terraformRelease(binary []byte, sums string) releasetest.Release {
	return releasetest.Release{Product: "terraform", Version: tfVersion, Files: map[string][]byte{"terraform": binary}, Sums: sums}
}

// envtestServer serves an envtest index and its archive, which holds kube-apiserver,
// etcd and kubectl as controller-tools packs them. hash, when set, replaces the index's
// true SHA-512 of the archive.
func newEnvtestServer(t *testing.T, etcd []byte, hash string) (index string, archive []byte) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string][]byte{"kube-apiserver": apiserverBinary, "etcd": etcd, "kubectl": script("kubectl")} {
		if err := tw.WriteHeader(&tar.Header{Name: "controller-tools/envtest/" + name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	archive = buf.Bytes()
	if hash == "" {
		sum := sha512.Sum512(archive)
		hash = hex.EncodeToString(sum[:])
	}
	name := fmt.Sprintf("envtest-v%s-%s-%s.tar.gz", kubeVersion, runtime.GOOS, runtime.GOARCH)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/envtest-releases.yaml":
			fmt.Fprintf(w, "releases:\n  v%s:\n    %s:\n      hash: %s\n      selfLink: %s/archives/%s\n", kubeVersion, name, hash, srv.URL, name)
		case "/archives/" + name:
			_, _ = w.Write(archive)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/envtest-releases.yaml", archive
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestTerraformFromReleases(t *testing.T) {
	signer, key := releasetest.NewKey(t)
	srv := newReleaseServer(t, signer, terraformBinary, "")
	out := t.TempDir()
	code, err := run(context.Background(), []string{"terraform", "-version", tfVersion, "-out", out},
		env(map[string]string{"TERRASEED_RELEASES_URL": srv.URL, "TERRASEED_RELEASES_KEY": releasetest.WriteKey(t, key)}))
	if code != 0 || err != nil {
		t.Fatalf("exit %d: %v", code, err)
	}
	got, err := os.ReadFile(filepath.Join(out, "terraform"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, terraformBinary) {
		t.Fatalf("installed terraform is not the released one: %q", got)
	}
	if names := entries(t, out); len(names) != 1 {
		t.Fatalf("the install directory holds %v, want terraform alone", names)
	}
	r := terraformRelease(nil, "")
	if srv.Hits(r.Dir()+r.ZipName()) != 1 || srv.Hits(r.Dir()+"terraform_"+tfVersion+"_SHA256SUMS.sig") != 1 {
		t.Fatalf("want the archive and the signature requested once each")
	}
}

func TestTerraformBadChecksumIsRefused(t *testing.T) {
	signer, key := releasetest.NewKey(t)
	zipName := terraformRelease(nil, "").ZipName()
	// Signed, but not the archive's checksum: a tampered or corrupted archive.
	other := sha256.Sum256([]byte("another archive"))
	srv := newReleaseServer(t, signer, terraformBinary, hex.EncodeToString(other[:])+"  "+zipName+"\n")
	out := t.TempDir()
	code, err := run(context.Background(), []string{"terraform", "-version", tfVersion, "-out", out},
		env(map[string]string{"TERRASEED_RELEASES_URL": srv.URL, "TERRASEED_RELEASES_KEY": releasetest.WriteKey(t, key)}))
	if code != 1 || err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("exit %d, %v: want 1 and a checksum mismatch", code, err)
	}
	if names := entries(t, out); len(names) != 0 {
		t.Fatalf("a refused download left %v", names)
	}
}

func TestTerraformChecksumsSignedByAnotherKeyAreRefused(t *testing.T) {
	signer, _ := releasetest.NewKey(t)
	_, trusted := releasetest.NewKey(t)
	srv := newReleaseServer(t, signer, terraformBinary, "")
	out := t.TempDir()
	code, err := run(context.Background(), []string{"terraform", "-version", tfVersion, "-out", out},
		env(map[string]string{"TERRASEED_RELEASES_URL": srv.URL, "TERRASEED_RELEASES_KEY": releasetest.WriteKey(t, trusted)}))
	if code != 1 || err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("exit %d, %v: want 1 and a signature that does not verify", code, err)
	}
	if names := entries(t, out); len(names) != 0 {
		t.Fatalf("a refused download left %v", names)
	}
}

// Without TERRASEED_RELEASES_KEY the checksums must be signed by HashiCorp's own key.
func TestTerraformChecksumsMustBeSignedByHashiCorpByDefault(t *testing.T) {
	signer, _ := releasetest.NewKey(t)
	srv := newReleaseServer(t, signer, terraformBinary, "")
	out := t.TempDir()
	code, err := run(context.Background(), []string{"terraform", "-version", tfVersion, "-out", out},
		env(map[string]string{"TERRASEED_RELEASES_URL": srv.URL}))
	if code != 1 || err == nil {
		t.Fatalf("exit %d, %v: want 1: checksums signed by an unknown key", code, err)
	}
	if names := entries(t, out); len(names) != 0 {
		t.Fatalf("a refused download left %v", names)
	}
}

func TestTerraformOfAnotherVersionIsRefused(t *testing.T) {
	signer, key := releasetest.NewKey(t)
	srv := newReleaseServer(t, signer, script("Terraform v1.6.0"), "")
	out := t.TempDir()
	code, err := run(context.Background(), []string{"terraform", "-version", tfVersion, "-out", out},
		env(map[string]string{"TERRASEED_RELEASES_URL": srv.URL, "TERRASEED_RELEASES_KEY": releasetest.WriteKey(t, key)}))
	if code != 1 || err == nil || !strings.Contains(err.Error(), "v1.6.0") {
		t.Fatalf("exit %d, %v: want 1 and the version it reports", code, err)
	}
	if names := entries(t, out); len(names) != 0 {
		t.Fatalf("a refused download left %v", names)
	}
}

func TestEnvtestFromIndex(t *testing.T) {
	index, _ := newEnvtestServer(t, etcdBinary, "")
	out := t.TempDir()
	code, err := run(context.Background(), []string{"envtest", "-version", kubeVersion, "-etcd-version", etcdVersion, "-out", out},
		env(map[string]string{"TERRASEED_ENVTEST_INDEX": index}))
	if code != 0 || err != nil {
		t.Fatalf("exit %d: %v", code, err)
	}
	for name, want := range map[string][]byte{"kube-apiserver": apiserverBinary, "etcd": etcdBinary} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("installed %s is not the archive's: %q", name, got)
		}
	}
	if names := entries(t, out); len(names) != 2 {
		t.Fatalf("the install directory holds %v, want kube-apiserver and etcd", names)
	}
}

func TestEnvtestWithAnotherEtcdInstallsTheAPIServerAlone(t *testing.T) {
	index, _ := newEnvtestServer(t, script("etcd Version: 3.6.4"), "")
	out := t.TempDir()
	code, err := run(context.Background(), []string{"envtest", "-version", kubeVersion, "-etcd-version", etcdVersion, "-out", out},
		env(map[string]string{"TERRASEED_ENVTEST_INDEX": index}))
	if code != 0 || err != nil {
		t.Fatalf("exit %d: %v", code, err)
	}
	if names := entries(t, out); len(names) != 1 || names[0] != "kube-apiserver" {
		t.Fatalf("the install directory holds %v, want kube-apiserver alone", names)
	}
}

func TestEnvtestBadChecksumIsRefused(t *testing.T) {
	other := sha512.Sum512([]byte("another archive"))
	index, _ := newEnvtestServer(t, etcdBinary, hex.EncodeToString(other[:]))
	out := t.TempDir()
	code, err := run(context.Background(), []string{"envtest", "-version", kubeVersion, "-etcd-version", etcdVersion, "-out", out},
		env(map[string]string{"TERRASEED_ENVTEST_INDEX": index}))
	if code != 1 || err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("exit %d, %v: want 1 and a checksum mismatch", code, err)
	}
	if names := entries(t, out); len(names) != 0 {
		t.Fatalf("a refused download left %v", names)
	}
}

// A host that accepts connections and never answers, and one that refuses them: the
// probe says so within its bound, with exit status 3.
func TestUnreachableSourceIsReportedWithinTheProbeTimeout(t *testing.T) {
	for _, host := range []string{releasetest.SilentHost(t), releasetest.ClosedHost(t)} {
		for _, args := range [][]string{
			{"terraform", "-version", tfVersion},
			{"envtest", "-version", kubeVersion, "-etcd-version", etcdVersion},
		} {
			start := time.Now()
			code, err := run(context.Background(), append(args, "-out", t.TempDir(), "-probe-timeout", "2s"), env(map[string]string{
				"TERRASEED_RELEASES_URL":  "http://" + host,
				"TERRASEED_ENVTEST_INDEX": "http://" + host + "/envtest-releases.yaml",
			}))
			took := time.Since(start)
			if code != 3 || err == nil {
				t.Fatalf("%s %s: exit %d, %v: want 3, not reachable", args[0], host, code, err)
			}
			if took > 4*time.Second {
				t.Fatalf("%s %s: took %s with a 2s probe", args[0], host, took)
			}
		}
	}
}

// bootstrap runs test/tools/bootstrap.sh with a scratch cache and the given environment,
// in its own process group, and returns what it printed.
func bootstrap(t *testing.T, ctx context.Context, cache string, vars map[string]string, tools ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", append([]string{"../tools/bootstrap.sh"}, tools...)...)
	cmd.Env = append(os.Environ(), "TERRASEED_TOOLS_CACHE="+cache)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// With the official releases reachable, bootstrap.sh installs terraform and the control
// plane from them, and builds nothing from source.
func TestBootstrapDownloadsInsteadOfBuilding(t *testing.T) {
	signer, key := releasetest.NewKey(t)
	srv := newReleaseServer(t, signer, terraformBinary, "")
	index, _ := newEnvtestServer(t, etcdBinary, "")
	cache := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := bootstrap(t, ctx, cache, map[string]string{
		"TERRASEED_RELEASES_URL":  srv.URL,
		"TERRASEED_RELEASES_KEY":  releasetest.WriteKey(t, key),
		"TERRASEED_ENVTEST_INDEX": index,
		// A failed download fails the run instead of building from source.
		"TERRASEED_DOWNLOAD": "require",
	}, "terraform", "control-plane")
	if err != nil {
		t.Fatalf("bootstrap.sh: %v\n%s", err, out)
	}
	t.Log(out)
	for _, want := range []string{"[tools] terraform: downloaded in", "[tools] kube-apiserver + etcd: downloaded in"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, ": built from source") || strings.Contains(out, "building from source") {
		t.Errorf("something was built from source:\n%s", out)
	}
	for path, want := range map[string][]byte{
		"terraform-" + tfVersion + "/terraform":                            terraformBinary,
		"kube-" + kubeVersion + "-etcd-" + etcdVersion + "/kube-apiserver": apiserverBinary,
		"kube-" + kubeVersion + "-etcd-" + etcdVersion + "/etcd":           etcdBinary,
	} {
		got, err := os.ReadFile(filepath.Join(cache, path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not the released binary", path)
		}
	}

	// A second run finds them in the cache.
	out, err = bootstrap(t, ctx, cache, map[string]string{"TERRASEED_DOWNLOAD": "require"}, "terraform", "control-plane")
	if err != nil || !strings.Contains(out, "terraform: cached") || !strings.Contains(out, "kube-apiserver + etcd: cached") {
		t.Fatalf("second run: %v\n%s", err, out)
	}
}

// A bad checksum fails the download and leaves nothing in the cache.
func TestBootstrapRefusesABadChecksum(t *testing.T) {
	other := sha512.Sum512([]byte("another archive"))
	index, _ := newEnvtestServer(t, etcdBinary, hex.EncodeToString(other[:]))
	cache := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := bootstrap(t, ctx, cache, map[string]string{
		"TERRASEED_ENVTEST_INDEX": index,
		"TERRASEED_DOWNLOAD":      "require",
	}, "control-plane")
	if err == nil {
		t.Fatalf("bootstrap.sh succeeded with a bad checksum:\n%s", out)
	}
	if !strings.Contains(out, "checksum mismatch") || !strings.Contains(out, "kube-apiserver + etcd: failed") {
		t.Fatalf("no checksum mismatch reported:\n%s", out)
	}
	if names := entries(t, cache); len(names) != 0 {
		t.Fatalf("the cache holds %v after a refused download", names)
	}
}

// Where the releases do not answer, bootstrap.sh turns to the source build within
// seconds. The test stops it once it says so, as the build itself takes minutes.
func TestBootstrapBuildsFromSourceWhenReleasesDoNotAnswer(t *testing.T) {
	silent := releasetest.SilentHost(t)
	cache := t.TempDir()
	// Compiles test/download first, so that the time below is the probe's.
	if out, err := exec.Command("go", "build", "-o", os.DevNull, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	cmd := exec.Command("bash", "../tools/bootstrap.sh", "terraform")
	cmd.Env = append(os.Environ(), "TERRASEED_TOOLS_CACHE="+cache, "TERRASEED_RELEASES_URL=http://"+silent,
		"TERRASEED_RELEASES_KEY=", "TERRASEED_DOWNLOAD=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		var buf bytes.Buffer
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			buf.Write(b[:n])
			for {
				line, rest, ok := strings.Cut(buf.String(), "\n")
				if !ok {
					break
				}
				buf.Reset()
				buf.WriteString(rest)
				lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	timeout := time.After(60 * time.Second)
	var seen []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("bootstrap.sh ended without turning to the source build:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			if strings.Contains(line, "terraform: no official release binary") && strings.Contains(line, "building from source") {
				// go run's own start-up is in this figure too; the probe is bounded by 5s.
				if took := time.Since(start); took > 30*time.Second {
					t.Fatalf("turned to the source build after %s", took)
				}
				return
			}
		case <-timeout:
			t.Fatalf("no turn to the source build within 60s:\n%s", strings.Join(seen, "\n"))
		}
	}
}
