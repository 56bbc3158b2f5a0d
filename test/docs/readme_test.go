package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

var (
	// documentedTarget is a Makefile rule with a `## what it does` comment.
	documentedTarget = regexp.MustCompile(`(?m)^([a-zA-Z_-]+):[^#\n]*## (.+)$`)
	markdownLink     = regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`)
	codeSpan         = regexp.MustCompile("`([^`\n]+)`")
	fencedBlock      = regexp.MustCompile("(?ms)^```.*?^```$")
)

// `make help` lists every target the Makefile documents, with its comment, in the
// Makefile's order.
func TestMakeHelp(t *testing.T) {
	g := NewWithT(t)
	makefile, err := os.ReadFile("../../Makefile")
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command("make", "-s", "--no-print-directory", "help")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	targets := documentedTarget.FindAllStringSubmatch(string(makefile), -1)
	g.Expect(targets).To(ContainElement(HaveExactElements(HaveSuffix("help: ## List the targets and what each does."), "help", Not(BeEmpty()))))
	g.Expect(lines).To(HaveLen(len(targets)))
	for i, target := range targets {
		name, text := target[1], strings.ReplaceAll(target[2], "$$", "$")
		g.Expect(strings.Fields(lines[i])[0]).To(Equal(name))
		g.Expect(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), name))).To(Equal(text))
	}
}

// README.md refers only to files of the repository, and says what each documented make
// target does.
func TestReadmeStaysInTheRepository(t *testing.T) {
	g := NewWithT(t)
	readme, err := os.ReadFile("../../README.md")
	g.Expect(err).NotTo(HaveOccurred())
	text := string(readme)

	var paths []string
	for _, m := range markdownLink.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(m[1], "://") {
			paths = append(paths, m[1])
		}
	}
	// Code spans that name a file or directory of the repository: a path under one of its
	// top-level entries, or a Markdown file.
	top, err := os.ReadDir("../..")
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range codeSpan.FindAllStringSubmatch(fencedBlock.ReplaceAllString(text, ""), -1) {
		span := m[1]
		if strings.ContainsAny(span, " $=") {
			continue
		}
		for _, entry := range top {
			if !strings.HasPrefix(entry.Name(), ".") && (span == entry.Name() || strings.HasPrefix(span, entry.Name()+"/")) {
				paths = append(paths, span)
			}
		}
		if strings.HasSuffix(span, ".md") {
			paths = append(paths, span)
		}
	}
	g.Expect(paths).To(ContainElements("docs/design.md", "LICENSE", "test/tools/versions.env"))
	for _, p := range paths {
		_, err := os.Stat(filepath.Join("../..", p))
		g.Expect(err).NotTo(HaveOccurred(), "README.md names %s, which is not in the repository", p)
	}

	makefile, err := os.ReadFile("../../Makefile")
	g.Expect(err).NotTo(HaveOccurred())
	for _, target := range documentedTarget.FindAllStringSubmatch(string(makefile), -1) {
		g.Expect(text).To(MatchRegexp("(?m)^\\| `make %s`[^|]*\\|[^|]+\\|[^|]+\\|$", regexp.QuoteMeta(target[1])), "README.md's table of make commands has no row for %s", target[1])
	}
}
