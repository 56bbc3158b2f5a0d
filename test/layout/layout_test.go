package layout_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func repositoryRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// The top level is the design card: a reader sees the architecture there, and a provider
// author adds a cloud as a directory of templates/.
func TestTheTopLevelIsTheDesignCard(t *testing.T) {
	g := NewWithT(t)
	root := repositoryRoot()
	for _, name := range []string{"cmd", "controller", "terraform", "templates", "charts", "test", "go.mod", "Dockerfile", "Makefile"} {
		g.Expect(filepath.Join(root, name)).To(BeAnExistingFile(), name)
	}
	g.Expect(filepath.Join(root, "internal")).NotTo(BeAnExistingFile(), "no internal/ around the parts the card names")
	for _, provider := range []string{"aws", "local"} {
		templates, err := filepath.Glob(filepath.Join(root, "templates", provider, "*.tf.tpl"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(templates).NotTo(BeEmpty(), "templates/%s holds its Terraform templates", provider)
		g.Expect(filepath.Join(root, "templates", provider, "provider.yaml")).To(BeAnExistingFile())
	}
}

// maxExported bounds what one package exports: a package that needs more does more than
// one thing.
const maxExported = 40

// No package of the controller, the run side or the providers exports more than
// maxExported names. api/ is not counted: it mirrors Gardener's API group, one Go package
// per group version as Kubernetes' API packages are, under Gardener's names.
func TestNoPackageExportsMoreThanItsBound(t *testing.T) {
	g := NewWithT(t)
	root := repositoryRoot()
	counts := map[string][]string{}
	for _, top := range []string{"cmd", "controller", "terraform", "templates"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			names, err := exportedNames(path)
			counts[rel] = append(counts[rel], names...)
			return err
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(counts).To(HaveKey("terraform/state"), "the walk found the packages")
	var over []string
	for pkg, names := range counts {
		if len(names) > maxExported {
			sort.Strings(names)
			over = append(over, pkg+": "+strings.Join(names, " "))
		}
	}
	g.Expect(over).To(BeEmpty(), "packages exporting more than %d names", maxExported)
}

// exportedNames are the exported package-level names a Go file declares.
func exportedNames(path string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.IsExported() {
				names = append(names, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names = append(names, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names, nil
}

// The house is built downwards: the run side (terraform/) and the providers (templates/)
// never import the controller or the commands, so either can be read, tested and changed
// without them. Tests included: a test helper that reaches up binds the layers as well.
func TestTheRunSideAndTheProvidersImportNoControllerOrCommand(t *testing.T) {
	g := NewWithT(t)
	root := repositoryRoot()
	const module = "github.com/terraseed/terraseed/"
	var upward []string
	files := 0
	for _, top := range []string{"terraform", "templates"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			files++
			for _, spec := range f.Imports {
				imported := strings.Trim(spec.Path.Value, `"`)
				if strings.HasPrefix(imported, module+"controller") || strings.HasPrefix(imported, module+"cmd") {
					rel, _ := filepath.Rel(root, path)
					upward = append(upward, rel+" imports "+imported)
				}
			}
			return nil
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(files).To(BeNumerically(">", 100), "the walk found the files")
	g.Expect(upward).To(BeEmpty())
}

// maxFunctionLines bounds a function of the controller, the run side and the providers: a
// longer one does more than one step, and its steps read better named.
const maxFunctionLines = 80

// No function of cmd/, controller/, terraform/ or templates/ (tests aside) is longer than
// maxFunctionLines, counted from its signature to its closing brace.
func TestNoFunctionIsLongerThanItsBound(t *testing.T) {
	g := NewWithT(t)
	root := repositoryRoot()
	var long []string
	functions := 0
	for _, top := range []string{"cmd", "controller", "terraform", "templates"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				functions++
				start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
				if lines := end.Line - start.Line + 1; lines > maxFunctionLines {
					rel, _ := filepath.Rel(root, path)
					long = append(long, fmt.Sprintf("%s:%d %s: %d lines", rel, start.Line, fn.Name.Name, lines))
				}
			}
			return nil
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(functions).To(BeNumerically(">", 500), "the walk found the functions")
	g.Expect(long).To(BeEmpty(), "functions longer than %d lines", maxFunctionLines)
}

// actuators are the packages whose files a contributor reads to change what is done to a
// kind: each has a section of docs/design.md that says what every file of it does.
var actuators = []string{"controller/kinds", "controller/controlplane"}

// listedFile is an item of such a section: a file and its job.
var listedFile = regexp.MustCompile("(?m)^- `([^`/]+\\.go)`: ")

// Every Go file of an actuator package (tests aside) is named, with its job, in its
// section of docs/design.md ("### The files of `<package>`"), and the section names no file
// that is gone: a file added, renamed or removed without the design saying so fails here.
func TestEveryFileOfTheActuatorsIsNamedInTheDesign(t *testing.T) {
	g := NewWithT(t)
	root := repositoryRoot()
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	g.Expect(err).NotTo(HaveOccurred())
	var wrong []string
	for _, pkg := range actuators {
		heading := "### The files of `" + pkg + "`"
		section := markdownSection(string(design), heading)
		g.Expect(section).NotTo(BeEmpty(), "docs/design.md has no section %q", heading)
		listed := map[string]bool{}
		for _, m := range listedFile.FindAllStringSubmatch(section, -1) {
			listed[m[1]] = true
		}
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(files).NotTo(BeEmpty(), "the glob found the files of %s", pkg)
		for _, file := range files {
			name := filepath.Base(file)
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			if !listed[name] {
				wrong = append(wrong, pkg+"/"+name+": not named")
			}
			delete(listed, name)
		}
		for name := range listed {
			wrong = append(wrong, pkg+"/"+name+": named, and not there")
		}
	}
	slices.Sort(wrong)
	g.Expect(wrong).To(BeEmpty(), "the files of the actuators as docs/design.md names them under \"### The files of `<package>`\"")
}

// markdownSection is the text under heading, up to the next heading; empty when there is
// no such heading.
func markdownSection(text, heading string) string {
	_, after, found := strings.Cut(text, "\n"+heading+"\n")
	if !found {
		return ""
	}
	if i := strings.Index(after, "\n#"); i >= 0 {
		after = after[:i]
	}
	return after
}

// numberedCode is an item of a numbered list that starts with a name in code: a phase.
var numberedCode = regexp.MustCompile("(?m)^ *[0-9]+\\. `([A-Za-z]+)`: ")

// docs/design.md lists the phases of an apply and of a deletion as the code runs them: an
// operation's phases (apply, delete) in order, with those that prepare its run (prepare,
// prepareDestroy) after the phase that submits it.
func TestTheDesignListsThePhasesInTheCodesOrder(t *testing.T) {
	g := NewWithT(t)
	root := repositoryRoot()
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, op := range []struct{ file, phases, prepare, submit, from, to string }{
		{"apply.go", "apply", "prepare", "runOrWaitApply", "The phases of an apply", "The phases of a deletion"},
		{"delete.go", "delete", "prepareDestroy", "runOrWaitDestroy", "The phases of a deletion", "A forced deletion"},
	} {
		phases := operationPhases(g, filepath.Join(root, "controller", "kinds", op.file))
		g.Expect(phases).To(HaveKey(op.phases))
		g.Expect(phases).To(HaveKey(op.prepare))
		var want []string
		for _, p := range phases[op.phases] {
			want = append(want, p)
			if p == op.submit {
				want = append(want, phases[op.prepare]...)
			}
		}
		_, text, _ := strings.Cut(string(design), op.from)
		text, _, _ = strings.Cut(text, op.to)
		var listed []string
		for _, m := range numberedCode.FindAllStringSubmatch(text, -1) {
			listed = append(listed, m[1])
		}
		g.Expect(listed).To(Equal(want), "docs/design.md's %q as %s runs them", op.from, op.file)
	}
}

// operationPhases are, by method, the phases each method of file passes to runPhases, in
// their order.
func operationPhases(g Gomega, file string) map[string][]string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	g.Expect(err).NotTo(HaveOccurred())
	phases := map[string][]string{}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 3 {
				return true
			}
			if name, ok := call.Fun.(*ast.Ident); !ok || name.Name != "runPhases" {
				return true
			}
			if list, ok := call.Args[2].(*ast.CompositeLit); ok {
				for _, elt := range list.Elts {
					if sel, ok := elt.(*ast.SelectorExpr); ok {
						phases[fn.Name.Name] = append(phases[fn.Name.Name], sel.Sel.Name)
					}
				}
			}
			return false
		})
	}
	return phases
}
