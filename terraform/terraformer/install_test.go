package terraformer

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/test/testenv"
)

// droppingNetwork sends the HTTPS requests of the processes started after it to a proxy
// that accepts them and never answers, as a network that drops them does, and lets
// terraform's update check wait a minute for its answer.
func droppingNetwork(t *testing.T) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 64)
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			held <- conn
		}
	}()
	t.Cleanup(func() {
		_ = listener.Close()
		close(held)
		for conn := range held {
			_ = conn.Close()
		}
	})
	for _, name := range []string{"HTTPS_PROXY", "https_proxy"} {
		t.Setenv(name, "http://"+listener.Addr().String())
	}
	for _, name := range []string{"NO_PROXY", "no_proxy", "CHECKPOINT_DISABLE"} {
		t.Setenv(name, "")
	}
	t.Setenv("CHECKPOINT_TIMEOUT", "60000")
}

// fakeTerraform writes a script that answers `terraform version -json` as the given
// version does: no other terraform release can be built here.
func fakeTerraform(t *testing.T, v string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "terraform")
	script := "#!/bin/sh\necho '{\"terraform_version\": \"" + v + "\", \"platform\": \"linux_amd64\", \"provider_selections\": {}}'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTheNamedTerraformIsFoundWhereTheNetworkDropsTheUpdateCheck(t *testing.T) {
	g := NewWithT(t)
	droppingNetwork(t)
	terraform := testenv.Terraform(t)
	// A terraform of another version first on PATH is not the one named.
	t.Setenv("PATH", filepath.Dir(fakeTerraform(t, "1.11.4"))+string(os.PathListSeparator)+os.Getenv("PATH"))

	g.Expect(FindTerraform(context.Background(), terraform, false, "")).To(Equal(terraform))
}

func TestTerraformIsFoundOnPathPastOtherVersions(t *testing.T) {
	g := NewWithT(t)
	droppingNetwork(t)
	terraform := testenv.Terraform(t)
	other := fakeTerraform(t, "1.11.4")
	t.Setenv("PATH", filepath.Dir(other)+string(os.PathListSeparator)+filepath.Dir(terraform))

	g.Expect(FindTerraform(context.Background(), "", false, "")).To(Equal(terraform))
}

func TestARefusedTerraformIsNamedWithItsVersion(t *testing.T) {
	g := NewWithT(t)
	other := fakeTerraform(t, "1.4.6")

	_, err := FindTerraform(context.Background(), other, false, "")
	g.Expect(err).To(MatchError(errTerraformNotFound))
	g.Expect(err).To(MatchError(ContainSubstring(other + " is terraform 1.4.6, not " + TerraformVersion)))

	t.Setenv("PATH", filepath.Dir(other))
	_, err = FindTerraform(context.Background(), "", false, "")
	g.Expect(err).To(MatchError(errTerraformNotFound))
	g.Expect(err).To(MatchError(ContainSubstring(other + " is terraform 1.4.6")))

	t.Setenv("PATH", t.TempDir())
	_, err = FindTerraform(context.Background(), "", false, "")
	g.Expect(err).To(MatchError(ContainSubstring("none on PATH")))

	_, err = FindTerraform(context.Background(), filepath.Join(t.TempDir(), "terraform"), false, "")
	g.Expect(err).To(MatchError(errTerraformNotFound))
	g.Expect(err).To(MatchError(ContainSubstring("no such file")))
}
