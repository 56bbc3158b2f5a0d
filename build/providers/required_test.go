package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// root is the repository.
var root = func() string {
	p, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return p
}()

func sources(ps []Provider) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// What the listing reads from an embedded provider's templates is what the rendered
// configurations require: the golden renders of every shipped case (which the templates
// package checks against its renders) read as plain HCL.
func TestListingMatchesTheRenderedTemplates(t *testing.T) {
	g := NewWithT(t)
	dirs, err := providerDirs(filepath.Join(root, "templates"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dirs).To(HaveLen(2))
	for _, dir := range dirs {
		fromTemplates, err := Required(dir)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fromTemplates).NotTo(BeEmpty(), dir)
		cases, err := filepath.Glob(filepath.Join(root, "templates/testdata/golden", filepath.Base(dir), "*"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cases).NotTo(BeEmpty(), dir)
		for _, c := range cases {
			files, err := terraformFiles(c)
			g.Expect(err).NotTo(HaveOccurred())
			var rendered []Provider
			for _, f := range files {
				found, err := requiredIn(f)
				g.Expect(err).NotTo(HaveOccurred())
				rendered = append(rendered, found...)
			}
			rendered, err = merge(rendered)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sources(rendered)).To(Equal(sources(fromTemplates)), c)
		}
	}

	all, err := Required(filepath.Join(root, "templates"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sources(all)).To(Equal([]string{"gavinbunney/kubectl@1.19.0", "hashicorp/aws@5.100.0"}))
	g.Expect(all[1].From).To(Equal(filepath.Join(root, "templates/aws/main.tf.tpl") + ":7"))
}

// writeProvider writes a provider directory holding provider.yaml and the given files.
func writeProvider(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files["provider.yaml"] = "type: test\n"
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func requiring(entries string) string {
	return "{{- $x := .infrastructure -}}\nterraform {\n  required_providers {\n" + entries + "  }\n}\n"
}

// Every bad input is refused with the directory, the file, the line and the field.
func TestRequiredRefusesBadInputs(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"a range", map[string]string{"main.tf.tpl": requiring("    aws = { source = \"hashicorp/aws\", version = \"~> 5.0\" }\n")},
			`/p/main.tf.tpl:4: required_providers.aws.version "~> 5.0" is not one exact version`},
		{"two versions allowed", map[string]string{"main.tf.tpl": requiring("    aws = { source = \"hashicorp/aws\", version = \">= 5.0, < 6.0\" }\n")},
			`/p/main.tf.tpl:4: required_providers.aws.version ">= 5.0, < 6.0" is not one exact version`},
		{"no source", map[string]string{"main.tf.tpl": requiring("    aws = { version = \"5.100.0\" }\n")},
			"/p/main.tf.tpl:4: required_providers.aws.source is missing"},
		{"no version", map[string]string{"main.tf": requiring("    aws = { source = \"hashicorp/aws\" }\n")},
			"/p/main.tf:4: required_providers.aws.version is missing"},
		{"a version alone", map[string]string{"main.tf.tpl": requiring("    aws = \"5.100.0\"\n")},
			"/p/main.tf.tpl:4: required_providers.aws is not an object of source and version"},
		{"a bad source", map[string]string{"main.tf.tpl": requiring("    aws = { source = \"hashicorp/aws/extra/more\", version = \"5.100.0\" }\n")},
			`/p/main.tf.tpl:4: required_providers.aws.source "hashicorp/aws/extra/more" is not [hostname/]namespace/type`},
		{"a computed version", map[string]string{"main.tf.tpl": requiring("    aws = { source = \"hashicorp/aws\", version = {{ .v }} }\n")},
			"/p/main.tf.tpl:4: required_providers.aws.version is not a constant string"},
		{"a reference", map[string]string{"main.tf.tpl": requiring("    aws = local.aws\n")},
			"/p/main.tf.tpl:4: required_providers.aws is not a constant object"},
		{"a template that does not parse", map[string]string{"main.tf.tpl": "{{ if .x }}\n" + requiring("")},
			"/p/main.tf.tpl:7: unexpected EOF"},
		{"a terraform block that does not parse", map[string]string{"main.tf.tpl": "terraform {\n  required_providers {\n    aws = {\n  }\n}\n"},
			"/p/main.tf.tpl:"},
		{"two versions in one file", map[string]string{"main.tf.tpl": requiring("    aws = { source = \"hashicorp/aws\", version = \"5.100.0\" }\n    aws2 = { source = \"hashicorp/aws\", version = \"5.99.0\" }\n")},
			"/p/main.tf.tpl:4 requires 5.100.0, "},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			writeProvider(t, filepath.Join(dir, "p"), c.files)
			_, err := Required(dir)
			g.Expect(err).To(MatchError(ContainSubstring(dir + c.want)))
		})
	}

	t.Run("one source at two versions in two providers", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		writeProvider(t, filepath.Join(dir, "a"), map[string]string{"main.tf.tpl": requiring("    aws = { source = \"hashicorp/aws\", version = \"5.100.0\" }\n")})
		writeProvider(t, filepath.Join(dir, "b"), map[string]string{"main.tf.tpl": requiring("    amazon = { source = \"registry.terraform.io/HashiCorp/aws\", version = \"5.99.0\" }\n")})
		_, err := Required(dir)
		g.Expect(err).To(MatchError(Equal("hashicorp/aws: " + dir + "/a/main.tf.tpl:4 requires 5.100.0, " + dir + "/b/main.tf.tpl:4 requires 5.99.0: the image mirrors one version of a provider")))
	})
	t.Run("no provider directory", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Required(dir)
		NewWithT(t).Expect(err).To(MatchError(dir + ": neither it nor a directory inside it holds a provider.yaml"))
	})
}

// What terraform accepts as one version, a host of its own, a provider asked for in both
// branches of an if and from two templates, and templates around and inside the
// terraform block.
func TestRequiredReadsWhatTemplatesWrite(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeProvider(t, filepath.Join(dir, "a"), map[string]string{
		"main.tf.tpl": `{{- $c := .infrastructure.providerConfig -}}
terraform {
  required_providers {
{{- if $c.cloud }}
    cloud = { source = "example.com/Corp/Cloud", version = "= 2.0.0-beta.1" }
{{- else }}
    kubectl = { source = "gavinbunney/kubectl", version = "1.19.0" }
{{- end }}
  }
}

output "x" {
  value = {{ if .a }}a{{ else }}"{{ .b }}"{{ end }}
}
`,
		"outputs.tf.tpl": requiring(`    kubectl = { source = "gavinbunney/kubectl", version = "1.19.0" }` + "\n"),
		"notes.txt":      "terraform { required_providers { x = { source = \"a/b\", version = \"1.0.0\" } } }",
	})
	got, err := Required(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sources(got)).To(Equal([]string{"example.com/corp/cloud@2.0.0-beta.1", "gavinbunney/kubectl@1.19.0"}))
}

func TestParseExtra(t *testing.T) {
	g := NewWithT(t)
	got, err := parseExtra(" example/thing@1.2.3  hashicorp/random@3.6.0 other/x@0.1.0=example.com/x-provider@v0.1.0 ")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sources(got)).To(Equal([]string{"example/thing@1.2.3", "hashicorp/random@3.6.0", "other/x@0.1.0"}))
	g.Expect(got[2].Module).To(Equal("example.com/x-provider@v0.1.0"))
	for _, bad := range []string{"example/thing", "example/thing@~>1.2", "thing@1.2.3", "example/thing@1.2.3=example.com/x"} {
		_, err := parseExtra(bad)
		g.Expect(err).To(MatchError(ContainSubstring(bad)), bad)
	}
}
