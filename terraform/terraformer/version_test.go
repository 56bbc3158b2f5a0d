package terraformer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/test/testenv"
)

// goBuiltBinary builds, with `go build` in a git repository tagged tag, a program of the
// given module whose `version -json` answers `answer`, as `go install module@tag`
// builds a release: its build information names the module at that release. It returns
// the binary and whether it was started: it leaves a file beside itself when it is.
func goBuiltBinary(t *testing.T, module, tag, answer string) (binary string, started func() bool) {
	t.Helper()
	g := NewWithT(t)
	src, out := t.TempDir(), t.TempDir()
	binary = filepath.Join(out, "terraform")
	marker := binary + ".started"
	main := fmt.Sprintf(`package main

import (
	"fmt"
	"os"
)

func main() {
	_ = os.WriteFile(%q, nil, 0o600)
	fmt.Println(%q)
}
`, marker, `{"terraform_version": "`+answer+`", "platform": "linux_amd64", "provider_selections": {}}`)
	g.Expect(os.WriteFile(filepath.Join(src, "go.mod"), []byte("module "+module+"\n\ngo 1.24\n"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(src, "main.go"), []byte(main), 0o600)).To(Succeed())
	for _, args := range [][]string{
		{"git", "init", "-q"},
		{"git", "add", "."},
		{"git", "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-qm", "release"},
		{"git", "tag", tag},
		// Outside the repository, which a file of its own would leave changed ("+dirty").
		{"go", "build", "-buildvcs=true", "-o", binary, "."},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%v: %s", args, out)
	}
	return binary, func() bool {
		_, err := os.Stat(marker)
		return err == nil
	}
}

// A binary whose build information names another release of terraform is refused for
// it, without being started, even when it would answer `version` with the pinned one.
func TestABinaryBuiltAsAnotherReleaseIsRefusedWithoutStartingIt(t *testing.T) {
	g := NewWithT(t)
	binary, started := goBuiltBinary(t, terraformModule, "v1.4.6", TerraformVersion)

	_, err := FindTerraform(context.Background(), binary, false, "")
	g.Expect(err).To(MatchError(errTerraformNotFound))
	g.Expect(err).To(MatchError(ContainSubstring(binary + " is terraform 1.4.6, not " + TerraformVersion)))

	f := newFixture(t, 1)
	f.settings.Terraform = binary
	_, err = f.run(run.Apply)
	g.Expect(err).To(MatchError(ContainSubstring("terraform " + TerraformVersion + " is not installed")))
	g.Expect(err).To(MatchError(ContainSubstring("is terraform 1.4.6")))
	g.Expect(f.Items(g)).To(BeEmpty())

	// Nor is it taken for OpenTofu.
	f.settings.OpenTofu = true
	_, err = f.run(run.Apply)
	g.Expect(err).To(MatchError(ContainSubstring(binary + " is terraform 1.4.6, not OpenTofu " + OpenTofuVersion)))
	g.Expect(started()).To(BeFalse(), "the binary was started")
}

// A binary whose build information names the pinned release is taken without being
// started to ask: that is what spares a run pod a terraform process.
func TestABinaryBuiltAsThePinnedReleaseIsNotStartedToAsk(t *testing.T) {
	g := NewWithT(t)
	binary, started := goBuiltBinary(t, terraformModule, "v"+TerraformVersion, "1.4.6")

	g.Expect(FindTerraform(context.Background(), binary, false, "")).To(Equal(binary))
	t.Setenv("PATH", filepath.Dir(binary))
	g.Expect(FindTerraform(context.Background(), "", false, "")).To(Equal(binary))
	g.Expect(started()).To(BeFalse(), "the binary was started")

	// The pinned terraform of the tests is built as the image builds it.
	known, err := checkBuiltVersion(testenv.Terraform(t), false)
	g.Expect(known).To(BeTrue())
	g.Expect(err).NotTo(HaveOccurred())
}

// A binary whose build information names no release, here another module's, is started
// and asked, and refused for its answer.
func TestABinaryOfNoKnownReleaseIsAsked(t *testing.T) {
	g := NewWithT(t)
	binary, started := goBuiltBinary(t, "example.com/not/terraform", "v"+TerraformVersion, "1.4.6")

	_, err := FindTerraform(context.Background(), binary, false, "")
	g.Expect(err).To(MatchError(ContainSubstring(binary + " is terraform 1.4.6, not " + TerraformVersion)))
	g.Expect(started()).To(BeTrue(), "the binary was asked")
}

// What a run remembers of a binary it asked is keyed to that very file: replaced by one
// of another version at the same path, of the same size and modification time, the binary
// is asked again and refused, in the process and the working directory that checked the
// first one.
func TestABinaryReplacedAtACheckedPathIsAskedAgainAndRefused(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 1)
	binary, commands := loggingTerraform(t)
	f.settings.Terraform = binary
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"version", "init", "apply"}))
	checked, err := os.Stat(binary)
	g.Expect(err).NotTo(HaveOccurred())

	// Padded to the same size, and given the same modification time.
	wrong := "#!/bin/sh\necho '{\"terraform_version\": \"1.4.6\", \"platform\": \"linux_amd64\", \"provider_selections\": {}}'\n"
	g.Expect(len(wrong)).To(BeNumerically("<", checked.Size()))
	wrong += "#" + strings.Repeat(" ", int(checked.Size())-len(wrong)-2) + "\n"
	replacement := binary + ".new"
	g.Expect(os.WriteFile(replacement, []byte(wrong), 0o755)).To(Succeed())
	g.Expect(os.Chtimes(replacement, checked.ModTime(), checked.ModTime())).To(Succeed())
	g.Expect(os.Rename(replacement, binary)).To(Succeed())
	replaced, err := os.Stat(binary)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(replaced.Size()).To(Equal(checked.Size()))
	g.Expect(replaced.ModTime()).To(Equal(checked.ModTime()))

	_, err = f.run(run.Apply)
	g.Expect(err).To(MatchError(ContainSubstring("is terraform 1.4.6")))
}

// The binary FindTerraform asked is not asked again by the run of the same process, in a
// working directory of its own: a run pod's terraformer starts terraform for init and
// apply only.
func TestABinaryFoundIsNotAskedAgainByTheRun(t *testing.T) {
	g := NewWithT(t)
	binary, commands := loggingTerraform(t)
	t.Setenv("PATH", filepath.Dir(binary))
	g.Expect(FindTerraform(context.Background(), "", false, "")).To(Equal(binary))
	g.Expect(commands()).To(Equal([]string{"version"}))

	f := newFixture(t, 1)
	f.settings.Terraform = binary
	_, err := f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"init", "apply"}))

	// Changed since, it is asked again.
	later := time.Now().Add(time.Minute)
	g.Expect(os.Chtimes(binary, later, later)).To(Succeed())
	f.newWorkDir()
	_, err = f.run(run.Apply)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands()).To(Equal([]string{"version", "init", "apply"}))
}
