package image

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// Dockerfile is a parsed Dockerfile: its stages and the ARGs before the first FROM.
type Dockerfile struct {
	Stages   []instructions.Stage
	MetaArgs []instructions.ArgCommand
}

// Parse parses a Dockerfile with buildkit's parser, the one `docker build` uses.
func Parse(r io.Reader) (*Dockerfile, error) {
	ast, err := parser.Parse(r)
	if err != nil {
		return nil, err
	}
	stages, metaArgs, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		return nil, err
	}
	return &Dockerfile{Stages: stages, MetaArgs: metaArgs}, nil
}

// ParseFile parses the Dockerfile at path.
func ParseFile(path string) (*Dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Final is the stage that becomes the image.
func (d *Dockerfile) Final() *instructions.Stage { return &d.Stages[len(d.Stages)-1] }

// Stage returns the stage of the given name, or nil.
func (d *Dockerfile) Stage(name string) *instructions.Stage {
	for i := range d.Stages {
		if strings.EqualFold(d.Stages[i].Name, name) {
			return &d.Stages[i]
		}
	}
	return nil
}

// Env is a stage's environment after its ENV and ARG instructions (ARG defaults only).
type Env map[string]string

func (e Env) Get(key string) (string, bool) { v, ok := e[key]; return v, ok }
func (e Env) Keys() []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// List returns the environment as KEY=VALUE pairs.
func (e Env) List() []string {
	var list []string
	for _, k := range e.Keys() {
		list = append(list, k+"="+e[k])
	}
	return list
}

// StageEnv returns the variables the stage's ENV and ARG instructions set (ARG defaults
// only), with quotes removed and references expanded as the build does.
func StageEnv(stage *instructions.Stage) Env {
	env, _, err := walk(stage)
	if err != nil {
		panic(err)
	}
	return env
}

// ShellCommands splits the stage's shell-form RUN instructions into simple commands (at
// `&&`), each split into words with the stage's environment expanded, as the shell would.
func ShellCommands(stage *instructions.Stage) ([][]string, error) {
	_, commands, err := walk(stage)
	return commands, err
}

func walk(stage *instructions.Stage) (Env, [][]string, error) {
	env := Env{}
	lex := shell.NewLex('\\')
	set := func(key, raw string) error {
		value, _, err := lex.ProcessWord(raw, env)
		if err != nil {
			return fmt.Errorf("%s=%s: %w", key, raw, err)
		}
		env[key] = value
		return nil
	}
	var commands [][]string
	for _, cmd := range stage.Commands {
		switch c := cmd.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				if err := set(kv.Key, kv.Value); err != nil {
					return nil, nil, err
				}
			}
		case *instructions.ArgCommand:
			for _, a := range c.Args {
				if a.Value != nil {
					if err := set(a.Key, *a.Value); err != nil {
						return nil, nil, err
					}
				}
			}
		case *instructions.RunCommand:
			if !c.PrependShell {
				commands = append(commands, c.CmdLine)
				continue
			}
			for _, part := range strings.Split(strings.Join(c.CmdLine, " "), "&&") {
				words, err := lex.ProcessWords(strings.TrimSpace(part), env)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: %w", part, err)
				}
				if len(words) > 0 {
					commands = append(commands, words)
				}
			}
		}
	}
	return env, commands, nil
}

// ImageRules are what the image must satisfy; Check reports every violation.
type ImageRules struct {
	// ReadContextFile reads a file of the build context (the terraform CLI configuration).
	ReadContextFile func(path string) ([]byte, error)
}

var (
	digestPinned = regexp.MustCompile(`^[^@\s]+:[^@:\s]+@sha256:[0-9a-f]{64}$`)
	remoteSource = regexp.MustCompile(`^(https?|git|ssh)://|^git@|\.git(#.*)?$`)
)

// Check returns the violations of the rules: base images pinned by tag and digest,
// several stages, a non-root USER in the image, no ADD from a remote source, and a
// terraform CLI configuration (TF_CLI_CONFIG_FILE) whose filesystem mirror is the
// directory the image bakes the providers into.
// It is long because it is one list of independent rules, each a few lines.
func (r ImageRules) Check(d *Dockerfile) []string {
	var violations []string
	fail := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }

	if len(d.Stages) < 2 {
		fail("not a multi-stage build: %d stage(s)", len(d.Stages))
	}
	stageNames := map[string]bool{}
	for _, s := range d.Stages {
		if !stageNames[strings.ToLower(s.BaseName)] {
			if !digestPinned.MatchString(s.BaseName) {
				fail("FROM %s: base images must be pinned as name:tag@sha256:digest", s.BaseName)
			} else if strings.Contains(s.BaseName, ":latest@") {
				fail("FROM %s: the tag must name a version, not latest", s.BaseName)
			}
		}
		if s.Name != "" {
			stageNames[strings.ToLower(s.Name)] = true
		}
		for _, cmd := range s.Commands {
			if add, ok := cmd.(*instructions.AddCommand); ok {
				for _, src := range add.SourcePaths {
					if remoteSource.MatchString(src) {
						fail("ADD %s: remote sources are not allowed; build or COPY it", src)
					}
				}
			}
		}
	}
	if len(d.Stages) == 0 {
		return violations
	}

	final := d.Final()
	user := ""
	for _, cmd := range final.Commands {
		if u, ok := cmd.(*instructions.UserCommand); ok {
			user = u.User
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	switch {
	case user == "":
		fail("the image sets no USER, so it runs as root")
	case uid == "0" || uid == "root" || !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid):
		fail("USER %s: the image must run as a numeric non-root user", user)
	}

	env := StageEnv(final)
	configPath, ok := env["TF_CLI_CONFIG_FILE"]
	if !ok {
		fail("the image does not set TF_CLI_CONFIG_FILE")
		return violations
	}
	var configSource string
	copies := map[string]*instructions.CopyCommand{}
	for _, cmd := range final.Commands {
		if c, ok := cmd.(*instructions.CopyCommand); ok {
			copies[c.DestPath] = c
			if c.DestPath == configPath && c.From == "" && len(c.SourcePaths) == 1 {
				configSource = c.SourcePaths[0]
			}
		}
	}
	if configSource == "" {
		fail("TF_CLI_CONFIG_FILE=%s is not a file copied from the build context", configPath)
		return violations
	}
	content, err := r.ReadContextFile(configSource)
	if err != nil {
		fail("reading the terraform CLI configuration: %v", err)
		return violations
	}
	mirror, err := FilesystemMirror(content, configSource)
	if err != nil {
		fail("%s: %v", configSource, err)
		return violations
	}
	baked, ok := copies[mirror]
	if !ok || baked.From == "" || d.Stage(baked.From) == nil {
		fail("the CLI configuration's filesystem mirror %s is not a directory the image copies from a build stage", mirror)
	}
	for _, key := range []string{"TERRASEED_PROVIDER_MIRROR", "TERRAFORM_PROVIDER_MIRROR"} {
		if env[key] != mirror {
			fail("%s=%q, the CLI configuration's mirror is %q", key, env[key], mirror)
		}
	}
	return violations
}

// FilesystemMirror returns the path of the only filesystem_mirror of a terraform CLI
// configuration, parsed with HCL as terraform parses it.
func FilesystemMirror(content []byte, filename string) (string, error) {
	file, diags := hclparse.NewParser().ParseHCL(content, filename)
	if diags.HasErrors() {
		return "", diags
	}
	var config struct {
		ProviderInstallation []struct {
			FilesystemMirror []struct {
				Path    string   `hcl:"path"`
				Include []string `hcl:"include,optional"`
				Exclude []string `hcl:"exclude,optional"`
			} `hcl:"filesystem_mirror,block"`
			Direct []struct {
				Remain hcl.Body `hcl:",remain"`
			} `hcl:"direct,block"`
			Remain hcl.Body `hcl:",remain"`
		} `hcl:"provider_installation,block"`
		Remain hcl.Body `hcl:",remain"`
	}
	if diags := gohcl.DecodeBody(file.Body, nil, &config); diags.HasErrors() {
		return "", diags
	}
	if len(config.ProviderInstallation) != 1 || len(config.ProviderInstallation[0].FilesystemMirror) != 1 {
		return "", fmt.Errorf("want one provider_installation block with one filesystem_mirror")
	}
	if len(config.ProviderInstallation[0].Direct) > 0 {
		return "", fmt.Errorf("provider_installation allows direct downloads")
	}
	return config.ProviderInstallation[0].FilesystemMirror[0].Path, nil
}
