package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/build/release/releasetest"
)

const awsVersion = "5.100.0"

var (
	platform = runtime.GOOS + "_" + runtime.GOARCH
	// The binary as HashiCorp's provider archives name it: with its plugin protocol.
	awsBinary = "terraform-provider-aws_v" + awsVersion + "_x5"
	awsDir    = filepath.Join("registry.terraform.io/hashicorp/aws", awsVersion, platform)
)

func awsRelease(sums string) releasetest.Release {
	return releasetest.Release{
		Product: "terraform-provider-aws", Version: awsVersion, Sums: sums,
		Files: map[string][]byte{awsBinary: []byte("#!/bin/sh\necho aws\n"), "LICENSE.txt": []byte("license")},
	}
}

// awsTemplates is a provider directory whose template requires hashicorp/aws.
func awsTemplates(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "aws")
	writeProvider(t, dir, map[string]string{"main.tf.tpl": requiring(`    aws = { source = "hashicorp/aws", version = "` + awsVersion + `" }` + "\n")})
	return dir
}

// mirror runs `providers mirror` against the releases site url, trusting key, and returns
// the mirror, what it printed, the exit status and the error.
func mirror(t *testing.T, url, key string, args ...string) (string, string, int, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mirror")
	env := map[string]string{"TERRASEED_RELEASES_URL": url, "TERRASEED_RELEASES_KEY": key}
	var stdout bytes.Buffer
	code, err := run(context.Background(), append([]string{"mirror", "-out", out, "-probe-timeout", "2s"}, args...),
		func(k string) string { return env[k] }, &stdout)
	return out, stdout.String(), code, err
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A HashiCorp provider comes as its signed release archive: its binary lands in the
// mirror's layout, executable by anyone, and nothing else does.
func TestMirrorDownloadsHashiCorpReleases(t *testing.T) {
	g := NewWithT(t)
	signer, key := releasetest.NewKey(t)
	srv := releasetest.NewServer(t, signer, awsRelease(""))
	out, stdout, code, err := mirror(t, srv.URL, releasetest.WriteKey(t, key), awsTemplates(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(Equal("mirrored hashicorp/aws " + awsVersion + ": the release archive from " + srv.URL + "\n"))

	g.Expect(files(t, out)).To(Equal([]string{filepath.Join(awsDir, awsBinary)}))
	path := filepath.Join(out, awsDir, awsBinary)
	info, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(fs.FileMode(0o755)))
	g.Expect(os.ReadFile(path)).To(Equal(awsRelease("").Files[awsBinary]))
	r := awsRelease("")
	g.Expect(srv.Hits(r.Dir() + r.ZipName())).To(Equal(1))
	g.Expect(srv.Hits(r.Dir() + "terraform-provider-aws_" + awsVersion + "_SHA256SUMS.sig")).To(Equal(1))
}

// An archive that is not the one the signed checksums name, and checksums signed by
// another key, are refused even with -skip-unreachable, and the mirror holds nothing.
func TestMirrorRefusesBadReleases(t *testing.T) {
	signer, key := releasetest.NewKey(t)
	_, otherKey := releasetest.NewKey(t)
	other := sha256.Sum256([]byte("another archive"))
	for _, c := range []struct {
		name, sums, key, want string
	}{
		{"a bad checksum", hex.EncodeToString(other[:]) + "  " + awsRelease("").ZipName() + "\n", key, "checksum does not match"},
		{"another key", "", otherKey, "signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := releasetest.NewServer(t, signer, awsRelease(c.sums))
			out, stdout, code, err := mirror(t, srv.URL, releasetest.WriteKey(t, c.key), "-skip-unreachable", awsTemplates(t))
			g.Expect(code).To(Equal(1))
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
			g.Expect(stdout).To(BeEmpty())
			g.Expect(files(t, out)).To(BeEmpty())
		})
	}
}

// A releases site that does not answer, or refuses connections: with -skip-unreachable
// the provider is left out, and the output says so, within the probe's bound; without,
// the mirror fails.
func TestMirrorUnreachableReleases(t *testing.T) {
	_, key := releasetest.NewKey(t)
	for _, host := range []string{releasetest.SilentHost(t), releasetest.ClosedHost(t)} {
		t.Run(host, func(t *testing.T) {
			g := NewWithT(t)
			url := "http://" + host
			start := time.Now()
			out, stdout, code, err := mirror(t, url, releasetest.WriteKey(t, key), "-skip-unreachable", awsTemplates(t))
			g.Expect(time.Since(start)).To(BeNumerically("<", 4*time.Second))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(0))
			g.Expect(stdout).To(HavePrefix("left out hashicorp/aws " + awsVersion + ": " + url + "/terraform-provider-aws/" + awsVersion + "/index.json not reachable within 2s: "))
			g.Expect(strings.Count(stdout, "\n")).To(Equal(1))
			g.Expect(files(t, out)).To(BeEmpty())
			g.Expect(out).To(BeADirectory())

			_, stdout, code, err = mirror(t, url, releasetest.WriteKey(t, key), awsTemplates(t))
			g.Expect(code).To(Equal(1))
			g.Expect(err).To(MatchError(ContainSubstring("not reachable within 2s")))
			g.Expect(stdout).To(BeEmpty())
		})
	}
}

// -extra adds providers to those the templates require; one of them at another version
// than a template's is refused, naming both.
func TestMirrorExtraProviders(t *testing.T) {
	g := NewWithT(t)
	signer, key := releasetest.NewKey(t)
	srv := releasetest.NewServer(t, signer, awsRelease(""))
	dir := filepath.Join(t.TempDir(), "none")
	writeProvider(t, dir, map[string]string{"main.tf.tpl": "output \"x\" { value = 1 }\n"})
	out, _, code, err := mirror(t, srv.URL, releasetest.WriteKey(t, key), "-extra", "hashicorp/aws@"+awsVersion, dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(0))
	g.Expect(files(t, out)).To(Equal([]string{filepath.Join(awsDir, awsBinary)}))

	templates := awsTemplates(t)
	_, _, code, err = mirror(t, srv.URL, releasetest.WriteKey(t, key), "-extra", "hashicorp/aws@5.99.0", templates)
	g.Expect(code).To(Equal(1))
	g.Expect(err).To(MatchError("hashicorp/aws: " + filepath.Join(templates, "main.tf.tpl") + ":4 requires " + awsVersion + ", -extra requires 5.99.0: the image mirrors one version of a provider"))
}
