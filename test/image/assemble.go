package image

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gofrs/flock"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// Assembly builds the image of a Dockerfile's final stage on a machine without a
// container engine or a registry: it follows the final stage instruction by instruction,
// taking what the Dockerfile copies from its build stages from files built here, and
// refuses any instruction or source it cannot follow, so that the Dockerfile and the
// assembled image cannot drift apart unnoticed.
type Assembly struct {
	Dockerfile *Dockerfile
	// Context is the build context: COPY without --from reads from it.
	Context string
	// Stages stand for the build stages: for each stage name, the paths the Dockerfile
	// copies from it, mapped to files or directories of this machine.
	Stages map[string]map[string]string
	// Base stands for the final stage's base image.
	Base BaseImage
}

// BaseImage stands for a base image that cannot be pulled here.
type BaseImage struct {
	// Name is the image's repository and tag, without the digest.
	Name   string
	Config Config
	Layers []Layer
}

// Image returns the final stage's image: the base's layers, one layer per COPY, and the
// configuration the stage's ENV, USER, WORKDIR, LABEL, ENTRYPOINT and CMD set.
// It is long because it is one switch over the Dockerfile instructions a stage may hold.
func (a Assembly) Image() (Image, error) {
	final := a.Dockerfile.Final()
	base, _, _ := strings.Cut(final.BaseName, "@")
	if base != a.Base.Name {
		return Image{}, fmt.Errorf("FROM %s: the assembly stands in for %s only", final.BaseName, a.Base.Name)
	}
	img := Image{Config: a.Base.Config, Layers: slices.Clone(a.Base.Layers)}
	img.Config.Env = slices.Clone(img.Config.Env)
	vars := map[string]string{}
	for _, kv := range img.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	// ARGs expand in later instructions but do not persist in the image.
	args := map[string]string{}
	lex := shell.NewLex('\\')
	expand := func(word string) (string, error) {
		scope := map[string]string{}
		for k, v := range args {
			scope[k] = v
		}
		for k, v := range vars {
			scope[k] = v
		}
		out, _, err := lex.ProcessWord(word, Env(scope))
		return out, err
	}
	for _, cmd := range final.Commands {
		switch c := cmd.(type) {
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				if kv.Value != nil {
					args[kv.Key] = *kv.Value
				}
			}
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				v, err := expand(kv.Value)
				if err != nil {
					return Image{}, err
				}
				vars[kv.Key] = v
				img.Config.Env = setEnv(img.Config.Env, kv.Key, v)
			}
		case *instructions.LabelCommand:
			if img.Config.Labels == nil {
				img.Config.Labels = map[string]string{}
			}
			for _, kv := range c.Labels {
				img.Config.Labels[kv.Key] = kv.Value
			}
		case *instructions.UserCommand:
			user, err := expand(c.User)
			if err != nil {
				return Image{}, err
			}
			img.Config.User = user
		case *instructions.WorkdirCommand:
			dir, err := expand(c.Path)
			if err != nil {
				return Image{}, err
			}
			img.Config.WorkingDir = path.Join(img.Config.WorkingDir, dir)
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				return Image{}, fmt.Errorf("ENTRYPOINT %s: the shell form needs a shell; use the exec form", c.CmdLine)
			}
			img.Config.Entrypoint = slices.Clone(c.CmdLine)
			img.Config.Cmd = nil
		case *instructions.CmdCommand:
			if c.PrependShell {
				return Image{}, fmt.Errorf("CMD %s: the shell form needs a shell; use the exec form", c.CmdLine)
			}
			img.Config.Cmd = slices.Clone(c.CmdLine)
		case *instructions.CopyCommand:
			layer, err := a.copyLayer(c, expand)
			if err != nil {
				return Image{}, err
			}
			img.Layers = append(img.Layers, layer)
		default:
			return Image{}, fmt.Errorf("%s: the assembly cannot follow this instruction", cmd.Name())
		}
	}
	return img, nil
}

func (a Assembly) copyLayer(c *instructions.CopyCommand, expand func(string) (string, error)) (Layer, error) {
	uid, gid := 0, 0
	if c.Chown != "" {
		u, g, ok := strings.Cut(c.Chown, ":")
		var err1, err2 error
		uid, err1 = strconv.Atoi(u)
		gid, err2 = strconv.Atoi(g)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("COPY --chown=%s: only numeric uid:gid", c.Chown)
		}
	}
	if c.Chmod != "" || c.Link || len(c.ExcludePatterns) > 0 || c.Parents {
		return nil, fmt.Errorf("COPY %v: --chmod, --link, --exclude and --parents are not followed", c.SourcePaths)
	}
	dest, err := expand(c.DestPath)
	if err != nil {
		return nil, err
	}
	if len(c.SourceContents) > 0 {
		return nil, fmt.Errorf("COPY %s: heredocs are not followed", dest)
	}
	var layer Layer
	for _, src := range c.SourcePaths {
		local, err := a.source(c.From, src)
		if err != nil {
			return nil, err
		}
		info, err := os.Stat(local)
		if err != nil {
			return nil, fmt.Errorf("COPY %s: %w", src, err)
		}
		target := dest
		if strings.HasSuffix(dest, "/") || len(c.SourcePaths) > 1 {
			if !info.IsDir() {
				target = path.Join(dest, path.Base(src))
			}
		}
		files, err := Tree(local, path.Clean(target), uid, gid)
		if err != nil {
			return nil, err
		}
		layer = append(layer, files...)
	}
	return layer, nil
}

// source returns the local file or directory standing for src of stage from ("" for the
// build context).
func (a Assembly) source(from, src string) (string, error) {
	if from == "" {
		clean := filepath.Clean(filepath.FromSlash(src))
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "..") || strings.ContainsAny(src, "*?[") {
			return "", fmt.Errorf("COPY %s: only plain paths inside the build context are followed", src)
		}
		return filepath.Join(a.Context, clean), nil
	}
	if a.Dockerfile.Stage(from) == nil {
		return "", fmt.Errorf("COPY --from=%s %s: only build stages of the Dockerfile are followed", from, src)
	}
	local, ok := a.Stages[from][src]
	if !ok {
		return "", fmt.Errorf("COPY --from=%s %s: the assembly has nothing standing for this", from, src)
	}
	return local, nil
}

func setEnv(env []string, key, value string) []string {
	for i, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			env[i] = key + "=" + value
			return env
		}
	}
	return append(env, key+"="+value)
}

// Distroless stands in for gcr.io/distroless/static-debian12:nonroot, the final stage's
// base: the same user database, home, /tmp and CA bundle location and the same
// configuration (user 65532, PATH, SSL_CERT_FILE), without Debian's package metadata.
// The CA bundle is this machine's.
func Distroless() BaseImage {
	dir := func(p string, mode fs.FileMode, id int) File {
		return File{Path: p, Mode: fs.ModeDir | mode, UID: id, GID: id}
	}
	file := func(p, content string) File { return File{Path: p, Mode: 0o644, Data: []byte(content)} }
	layer := Layer{
		dir("/etc", 0o755, 0),
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		dir("/home", 0o755, 0),
		dir("/home/nonroot", 0o700, 65532),
		dir("/root", 0o700, 0),
		{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		dir("/usr", 0o755, 0),
		dir("/usr/local", 0o755, 0),
		dir("/usr/local/bin", 0o755, 0),
		dir("/var", 0o755, 0),
		file("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
		file("/etc/group", "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n"),
		file("/etc/nsswitch.conf", "hosts: files dns\n"),
		file("/etc/os-release", "PRETTY_NAME=\"Distroless\"\nNAME=\"Debian GNU/Linux\"\nID=\"debian\"\nVERSION_ID=\"12\"\nVERSION=\"Debian GNU/Linux 12 (bookworm)\"\nHOME_URL=\"https://github.com/GoogleContainerTools/distroless\"\n"),
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		layer = append(layer, File{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Source: "/etc/ssl/certs/ca-certificates.crt"})
	}
	return BaseImage{
		Name: "gcr.io/distroless/static-debian12:nonroot",
		Config: Config{
			User:       "65532",
			WorkingDir: "/home/nonroot",
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		},
		Layers: []Layer{layer},
	}
}

// ProvidersStage runs the providers stage as the image build runs it: its one command,
// `go run <program> mirror -out=<mirror> ... <template dirs>`, runs in the build context
// (the stage copies what it needs to the same paths under its WORKDIR) with the stage's
// environment, here writing the mirror into out. Unlike the image build, it leaves out a
// provider whose releases site this machine cannot reach (-skip-unreachable), and the
// program says so in what it writes to log. It returns the stage's path of the mirror,
// mapped to out.
func ProvidersStage(d *Dockerfile, contextDir, out string, log io.Writer) (map[string]string, error) {
	s, mirror, err := providersCommand(d)
	if err != nil {
		return nil, err
	}
	args := slices.Clone(mirror.args)
	for i, a := range args {
		switch {
		case a == "-out" && i+1 < len(args):
			args[i+1] = out
		case strings.HasPrefix(a, "-out="):
			args[i] = "-out=" + out
		}
	}
	args = append([]string{"run", mirror.program, "mirror", "-skip-unreachable"}, args...)
	cmd := exec.Command("go", args...)
	cmd.Dir = contextDir
	cmd.Env = append(os.Environ(), StageEnv(s).List()...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = log, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return map[string]string{mirror.out: out}, nil
}

// RequiredProviders runs the providers stage's program as `list` over the template
// directories the stage mirrors, in the build context, and returns what it prints: the
// providers the templates require, one <source>@<version> each.
func RequiredProviders(d *Dockerfile, contextDir string) ([]string, error) {
	_, mirror, err := providersCommand(d)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", append([]string{"run", mirror.program, "list"}, mirror.dirs...)...)
	cmd.Dir = contextDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	output, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", cmd, err, stderr.String())
	}
	return strings.Fields(string(output)), nil
}

// mirrorCommand is the providers stage's command.
type mirrorCommand struct {
	program string
	// args are those after `mirror`.
	args []string
	// out is the mirror in the stage; dirs are the template directories.
	out  string
	dirs []string
}

func providersCommand(d *Dockerfile) (*instructions.Stage, mirrorCommand, error) {
	s := d.Stage("providers")
	if s == nil {
		return nil, mirrorCommand{}, fmt.Errorf("no stage %q", "providers")
	}
	commands, err := ShellCommands(s)
	if err != nil {
		return nil, mirrorCommand{}, err
	}
	if len(commands) != 1 || len(commands[0]) < 4 || commands[0][0] != "go" || commands[0][1] != "run" || commands[0][3] != "mirror" {
		return nil, mirrorCommand{}, fmt.Errorf("the providers stage runs %q, not one `go run <program> mirror -out=<mirror> ... <template dirs>`", commands)
	}
	if err := copiesInPlace(s); err != nil {
		return nil, mirrorCommand{}, err
	}
	c := mirrorCommand{program: commands[0][2], args: commands[0][4:]}
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a == "-out" && i+1 < len(c.args):
			i++
			c.out = c.args[i]
		case strings.HasPrefix(a, "-out="):
			c.out = strings.TrimPrefix(a, "-out=")
		case strings.HasPrefix(a, "-") && !strings.Contains(a, "="):
			return nil, mirrorCommand{}, fmt.Errorf("the providers stage's %s: give flags other than -out as -name=value", a)
		case !strings.HasPrefix(a, "-"):
			c.dirs = append(c.dirs, a)
		}
	}
	if c.out == "" || len(c.dirs) == 0 {
		return nil, mirrorCommand{}, fmt.Errorf("the providers stage runs %q: no -out or no template directories", commands[0])
	}
	return s, c, nil
}

// copiesInPlace requires every COPY of the stage to put build-context paths at the same
// paths under the stage's WORKDIR, so that running the stage's command in the build
// context sees what the image build sees.
func copiesInPlace(s *instructions.Stage) error {
	workdir := "/"
	for _, cmd := range s.Commands {
		switch c := cmd.(type) {
		case *instructions.WorkdirCommand:
			if path.IsAbs(c.Path) {
				workdir = path.Clean(c.Path)
			} else {
				workdir = path.Join(workdir, c.Path)
			}
		case *instructions.CopyCommand:
			for _, src := range c.SourcePaths {
				dest := c.DestPath
				if !path.IsAbs(dest) {
					dest = path.Join(workdir, dest)
				}
				if strings.HasSuffix(c.DestPath, "/") || len(c.SourcePaths) > 1 {
					dest = path.Join(dest, path.Base(src))
				}
				if c.From != "" || dest != path.Join(workdir, src) {
					return fmt.Errorf("COPY %s %s: the assembly runs the providers stage in the build context, where %s is not at %s", src, c.DestPath, dest, path.Join(workdir, src))
				}
			}
		}
	}
	return nil
}

// BuildStage runs the `go build` commands of a stage as the image build runs them (the
// stage's environment, the same flags) in dir, with each -o redirected into out, and
// returns the stage paths they write, mapped to the files built.
func BuildStage(d *Dockerfile, stage, dir, out string) (map[string]string, error) {
	s := d.Stage(stage)
	if s == nil {
		return nil, fmt.Errorf("no stage %q", stage)
	}
	env := StageEnv(s)
	commands, err := ShellCommands(s)
	if err != nil {
		return nil, err
	}
	// Packages running this at once would compile the same packages side by side: the
	// second waits and finds them in the build cache.
	lock := flock.New(filepath.Join(os.TempDir(), "terraseed-image-build.lock"))
	if err := lock.Lock(); err != nil {
		return nil, err
	}
	defer func() { _ = lock.Unlock() }()
	built := map[string]string{}
	for _, words := range commands {
		if len(words) < 2 || words[0] != "go" || words[1] != "build" {
			continue
		}
		args := slices.Clone(words[1:])
		for i := range args {
			if args[i] == "-o" && i+1 < len(args) {
				local := filepath.Join(out, path.Base(args[i+1]))
				built[args[i+1]] = local
				args[i+1] = local
			}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// The image's build environment wins over the machine's.
		cmd.Env = append(os.Environ(), env.List()...)
		if output, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
		}
	}
	return built, nil
}
