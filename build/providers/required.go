package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template/parse"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// DefaultHost is the registry a source without a hostname names.
const DefaultHost = "registry.terraform.io"

// Provider is one provider at one version, and where it was asked for.
type Provider struct {
	Host, Namespace, Type, Version string
	// Module is the Go module (module@version) a provider that is not HashiCorp's is built
	// from; empty: github.com/<namespace>/terraform-provider-<type>@v<version>.
	Module string
	// From says where it was asked for (file:line, or -extra), for messages.
	From string
}

// Source is the provider's source address as terraform prints it: without the default host.
func (p Provider) Source() string {
	s := p.Namespace + "/" + p.Type
	if p.Host != DefaultHost {
		s = p.Host + "/" + s
	}
	return s
}

// String is <source>@<version>, the form -extra takes.
func (p Provider) String() string { return p.Source() + "@" + p.Version }

func (p Provider) key() string { return p.Host + "/" + p.Namespace + "/" + p.Type }

const manifestFile = "provider.yaml"

var (
	// exactVersion is a version constraint that allows one version: terraform's "1.2.3"
	// or "= 1.2.3". The image mirrors one version of each provider, so a range could let
	// terraform ask for one the mirror does not hold.
	exactVersion = regexp.MustCompile(`^\s*(?:=\s*)?([0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?)\s*$`)
	sourcePart   = regexp.MustCompile(`^[0-9a-z](?:[0-9a-z-]*[0-9a-z])?$`)
	hostPart     = regexp.MustCompile(`^[0-9a-z](?:[0-9a-z.-]*[0-9a-z])?(?::[0-9]+)?$`)
	// declaration is a template action that only sets variables.
	declaration = regexp.MustCompile(`^\$\w*\s*(?:,\s*\$\w*\s*)?:?=`)
)

// Required returns the providers the provider directories require, one per source,
// sorted. Each dir is a provider directory (it holds provider.yaml) or a parent of
// provider directories, as the template registry reads them; in each, every *.tf.tpl
// template and *.tf file is read. Two versions of one source are an error naming both.
func Required(dirs ...string) ([]Provider, error) {
	var all []Provider
	for _, dir := range dirs {
		providerDirs, err := providerDirs(dir)
		if err != nil {
			return nil, err
		}
		for _, pd := range providerDirs {
			files, err := terraformFiles(pd)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				found, err := requiredIn(f)
				if err != nil {
					return nil, err
				}
				all = append(all, found...)
			}
		}
	}
	return merge(all)
}

// merge keeps one provider per source and refuses two versions of one.
func merge(all []Provider) ([]Provider, error) {
	bySource := map[string]Provider{}
	var errs []error
	for _, p := range all {
		seen, ok := bySource[p.key()]
		switch {
		case !ok:
			bySource[p.key()] = p
		case seen.Version != p.Version:
			errs = append(errs, fmt.Errorf("%s: %s requires %s, %s requires %s: the image mirrors one version of a provider",
				p.Source(), seen.From, seen.Version, p.From, p.Version))
		case seen.Module == "" && p.Module != "":
			bySource[p.key()] = p
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := make([]Provider, 0, len(bySource))
	for _, p := range bySource {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Provider) int { return strings.Compare(a.key(), b.key()) })
	return out, nil
}

func providerDirs(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, manifestFile)); err == nil {
		return []string{dir}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, manifestFile)); e.IsDir() && err == nil {
			dirs = append(dirs, sub)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s: neither it nor a directory inside it holds a %s", dir, manifestFile)
	}
	return dirs, nil
}

func terraformFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".tf.tpl") || strings.HasSuffix(e.Name(), ".tf")) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files, nil
}

// requiredIn reads the required_providers blocks of one file.
func requiredIn(path string) ([]Provider, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".tpl") {
		if src, err = terraformText(path, src); err != nil {
			return nil, err
		}
	}
	// Only the terraform blocks are parsed: the rest of a template, with both branches of
	// its ifs kept, need not be HCL (`value = {{ if .a }}x{{ else }}y{{ end }}`).
	file, diags := hclsyntax.ParseConfig(terraformBlocks(src, path), path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	var blocks []*hclsyntax.Block
	for _, tf := range file.Body.(*hclsyntax.Body).Blocks {
		for _, rp := range tf.Body.Blocks {
			if rp.Type == "required_providers" {
				blocks = append(blocks, rp)
			}
		}
	}
	var found []Provider
	var errs []error
	for _, rp := range blocks {
		{
			attrs := make([]*hclsyntax.Attribute, 0, len(rp.Body.Attributes))
			for _, a := range rp.Body.Attributes {
				attrs = append(attrs, a)
			}
			slices.SortFunc(attrs, func(a, b *hclsyntax.Attribute) int { return a.SrcRange.Start.Byte - b.SrcRange.Start.Byte })
			for _, a := range attrs {
				p, err := requirement(a)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: required_providers.%s", path, a.SrcRange.Start.Line, err))
					continue
				}
				p.From = fmt.Sprintf("%s:%d", path, a.SrcRange.Start.Line)
				found = append(found, p)
			}
		}
	}
	return found, errors.Join(errs...)
}

// terraformBlocks blanks out all but the top-level terraform blocks of src, found by
// HCL's scanner, keeping every newline so that positions stay those of src.
func terraformBlocks(src []byte, path string) []byte {
	out := bytes.Map(func(r rune) rune {
		if r == '\n' {
			return r
		}
		return ' '
	}, src)
	tokens, _ := hclsyntax.LexConfig(src, path, hcl.InitialPos)
	depth, start := 0, -1
	for i, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
		case hclsyntax.TokenCBrace, hclsyntax.TokenTemplateSeqEnd:
			depth--
			if depth == 0 && start >= 0 {
				end := tok.Range.End.Byte
				copy(out[start:end], src[start:end])
				start = -1
			}
		case hclsyntax.TokenIdent:
			atLineStart := i == 0 || tokens[i-1].Type == hclsyntax.TokenNewline
			if depth == 0 && atLineStart && string(tok.Bytes) == "terraform" &&
				i+1 < len(tokens) && tokens[i+1].Type == hclsyntax.TokenOBrace {
				start = tok.Range.Start.Byte
			}
		}
	}
	if start >= 0 {
		// A block that does not close: HCL says what is wrong with it.
		copy(out[start:], src[start:])
	}
	return out
}

// requirement reads one entry of required_providers; its errors start with the entry's
// field, for the caller to prefix.
func requirement(a *hclsyntax.Attribute) (Provider, error) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return Provider{}, fmt.Errorf("%s is not a constant object: %s", a.Name, diags.Error())
	}
	if !v.Type().IsObjectType() {
		return Provider{}, fmt.Errorf("%s is not an object of source and version", a.Name)
	}
	field := func(name string) (string, error) {
		if !v.Type().HasAttribute(name) {
			return "", fmt.Errorf("%s.%s is missing", a.Name, name)
		}
		f := v.GetAttr(name)
		if f.IsNull() {
			// A template action's value, known only when the template renders.
			return "", fmt.Errorf("%s.%s is not a constant string", a.Name, name)
		}
		if !f.IsKnown() || f.Type() != cty.String {
			return "", fmt.Errorf("%s.%s is not a string", a.Name, name)
		}
		return f.AsString(), nil
	}
	source, err := field("source")
	if err != nil {
		return Provider{}, err
	}
	constraint, err := field("version")
	if err != nil {
		return Provider{}, err
	}
	p, err := parseSource(source)
	if err != nil {
		return Provider{}, fmt.Errorf("%s.source %w", a.Name, err)
	}
	m := exactVersion.FindStringSubmatch(constraint)
	if m == nil {
		return Provider{}, fmt.Errorf("%s.version %q is not one exact version", a.Name, constraint)
	}
	p.Version = m[1]
	return p, nil
}

// parseSource parses [hostname/]namespace/type, as terraform does, case-insensitively.
func parseSource(source string) (Provider, error) {
	parts := strings.Split(strings.ToLower(source), "/")
	if len(parts) == 2 {
		parts = append([]string{DefaultHost}, parts...)
	}
	if len(parts) != 3 || !hostPart.MatchString(parts[0]) || !sourcePart.MatchString(parts[1]) || !sourcePart.MatchString(parts[2]) {
		return Provider{}, fmt.Errorf("%q is not [hostname/]namespace/type", source)
	}
	return Provider{Host: parts[0], Namespace: parts[1], Type: parts[2]}, nil
}

// terraformText turns a template into HCL that holds every terraform block the template
// can render: the text between the actions is kept as written (both branches of an if,
// a range's body once), an action that prints a value becomes null, and every other
// action vanishes. Each action's newlines are kept, so that HCL's lines are the template's.
func terraformText(path string, src []byte) ([]byte, error) {
	tree := parse.New(path)
	tree.Mode = parse.SkipFuncCheck
	if _, err := tree.Parse(string(src), "", "", map[string]*parse.Tree{}); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	rest := src
	for {
		start := bytes.Index(rest, []byte("{{"))
		if start < 0 {
			out.Write(rest)
			return out.Bytes(), nil
		}
		out.Write(rest[:start])
		end := actionEnd(rest[start+2:])
		if end < 0 {
			return nil, fmt.Errorf("%s: an action without its }}", path)
		}
		action := rest[start+2 : start+2+end]
		rest = rest[start+2+end+2:]
		if printsValue(action) {
			out.WriteString("null")
		}
		out.Write(bytes.Repeat([]byte("\n"), bytes.Count(action, []byte("\n"))))
	}
}

// actionEnd returns the offset of the }} that closes an action, past quoted strings and
// comments, or -1.
func actionEnd(s []byte) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\'' || c == '`':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' && c != '`' {
					i++
				}
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := bytes.Index(s[i+2:], []byte("*/"))
			if j < 0 {
				return -1
			}
			i += 2 + j + 1
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			return i
		}
	}
	return -1
}

func printsValue(action []byte) bool {
	a := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(string(action), "-"), "-"))
	if a == "" || strings.HasPrefix(a, "/*") || declaration.MatchString(a) {
		return false
	}
	switch strings.Fields(a)[0] {
	case "if", "else", "end", "range", "with", "define", "block", "template", "break", "continue":
		return false
	}
	return true
}
