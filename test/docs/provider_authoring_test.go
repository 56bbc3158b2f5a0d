package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// block is a fenced code block of the page and the marker comment before it.
type block struct {
	marker, arg, content string
	line                 int
}

var markerLine = regexp.MustCompile(`^<!-- (file|step|expect)(?::\s*(\S+))? -->$`)

// markedBlocks returns the fenced blocks that directly follow a marker comment.
func markedBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []block
	var pending *block
	var inside bool
	var content strings.Builder
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		switch {
		case inside && line == "```":
			inside = false
			if pending != nil {
				pending.content = content.String()
				blocks = append(blocks, *pending)
				pending = nil
			}
		case inside:
			content.WriteString(line + "\n")
		case strings.HasPrefix(line, "```"):
			inside = true
			content.Reset()
		case markerLine.MatchString(line):
			m := markerLine.FindStringSubmatch(line)
			pending = &block{marker: m[1], arg: m[2], line: n}
		case strings.TrimSpace(line) != "" && pending != nil:
			t.Fatalf("%s:%d: the marker of line %d is not followed by a code block", path, n, pending.line)
		}
	}
	if inside {
		t.Fatalf("%s: unterminated code block", path)
	}
	return blocks
}

func TestProviderAuthoringGuide(t *testing.T) {
	g := NewWithT(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	terraform := os.Getenv("TERRASEED_TERRAFORM")
	if terraform == "" {
		t.Fatal("TERRASEED_TERRAFORM is not set: run `make test`, or eval \"$(make -s env)\" first")
	}
	blocks := markedBlocks(t, filepath.Join(root, "docs", "provider-authoring.md"))

	// The user's binary, built as `go build` would build it.
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "terraseed"), "./cmd/terraseed")
	build.Dir = root
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)

	work := t.TempDir()
	emptyConfig := filepath.Join(t.TempDir(), "terraformrc")
	g.Expect(os.WriteFile(emptyConfig, nil, 0o600)).To(Succeed())
	environ := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+filepath.Dir(terraform)+string(os.PathListSeparator)+os.Getenv("PATH"),
		// The machine's own terraform configuration stays out of the user's run.
		"TF_CLI_CONFIG_FILE="+emptyConfig, "HOME="+work)

	var files, steps, expects int
	var lastOutput string
	for _, b := range blocks {
		switch b.marker {
		case "file":
			files++
			// The page and docs/examples/provider-authoring hold the same files.
			kept, err := os.ReadFile(filepath.Join(root, "docs", "examples", "provider-authoring", b.arg))
			g.Expect(err).NotTo(HaveOccurred(), "line %d", b.line)
			g.Expect(b.content).To(Equal(string(kept)), "line %d: %s differs from docs/examples/provider-authoring/%s", b.line, b.arg, b.arg)
			path := filepath.Join(work, b.arg)
			g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(path, []byte(b.content), 0o644)).To(Succeed())
		case "step":
			steps++
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.content)
			cmd.Dir = work
			cmd.Env = environ
			output, err := cmd.CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "the step at line %d failed:\n%s", b.line, output)
			lastOutput = string(output)
		case "expect":
			expects++
			for _, line := range strings.Split(strings.TrimSpace(b.content), "\n") {
				g.Expect(lastOutput).To(ContainSubstring(line), "line %d", b.line)
			}
		}
	}
	// The page still teaches the whole way: files, render and apply, a refused input, a
	// control plane and its mutation, a DNSRecord.
	g.Expect(files).To(BeNumerically(">=", 9))
	g.Expect(steps).To(Equal(5))
	g.Expect(expects).To(Equal(5))
	g.Expect(filepath.Join(work, "run", "terraform.tfstate")).To(BeAnExistingFile())
	g.Expect(filepath.Join(work, "record", "terraform.tfstate")).To(BeAnExistingFile())

	// The mutation is idempotent, as the webhook's must be: mutating the result again
	// prints it unchanged.
	again := exec.Command(filepath.Join(bin, "terraseed"), "mutate", "-f", "mutated.yaml", "--type", "sandbox", "--cluster", "cluster.yaml", "--providers", "providers")
	again.Dir, again.Env = work, environ
	twice, err := again.Output()
	g.Expect(err).NotTo(HaveOccurred())
	once, err := os.ReadFile(filepath.Join(work, "mutated.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(twice)).To(Equal(string(once)))
}
