package image

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/terraformer"
)

// root is the repository: the build context.
var root = func() string {
	p, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return p
}()

func readContext(path string) ([]byte, error) { return os.ReadFile(filepath.Join(root, path)) }

func parseDockerfile(t *testing.T, text string) *Dockerfile {
	t.Helper()
	d, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	return d
}

func dockerfileText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDockerfileFollowsTheRules(t *testing.T) {
	g := NewWithT(t)
	d := parseDockerfile(t, dockerfileText(t))
	g.Expect(ImageRules{ReadContextFile: readContext}.Check(d)).To(BeEmpty())

	// What the rules found, spelled out.
	g.Expect(d.Stages).To(HaveLen(4))
	final := d.Final()
	g.Expect(final.BaseName).To(HavePrefix("gcr.io/distroless/static-debian12:nonroot@sha256:"))
	env := StageEnv(final)
	g.Expect(env).To(HaveKeyWithValue("TF_CLI_CONFIG_FILE", "/etc/terraseed/terraformrc"))
	config, err := readContext("build/terraformrc")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(FilesystemMirror(config, "terraformrc")).To(Equal("/opt/terraseed/plugins"))

	// The pod executor starts /terraformer; the terraformer finds terraform on PATH.
	dests := map[string]string{}
	for _, cmd := range final.Commands {
		if c, ok := cmd.(*instructions.CopyCommand); ok {
			dests[c.DestPath] = c.From
		}
	}
	g.Expect(dests).To(HaveKeyWithValue("/terraformer", "build"))
	g.Expect(dests).To(HaveKeyWithValue("/terraseed", "build"))
	g.Expect(dests).To(HaveKeyWithValue("/usr/local/bin/terraform", "terraform"))
	g.Expect(dests).To(HaveKeyWithValue("/opt/terraseed/plugins", "providers"))
	g.Expect(env).To(HaveKeyWithValue("TERRASEED_TERRAFORM", "/usr/local/bin/terraform"))
}

// The rules are not vacuous: each broken variant of the real Dockerfile is refused with
// the reason.
func TestRulesRefuseBrokenDockerfiles(t *testing.T) {
	text := dockerfileText(t)
	const distroless = "gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639"
	cases := []struct {
		name, old, new, want string
	}{
		{"tag without digest", distroless, "gcr.io/distroless/static-debian12:nonroot", "must be pinned"},
		{"latest", distroless, "gcr.io/distroless/static-debian12:latest@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639", "not latest"},
		{"root user", "USER 65532:65532", "USER root", "non-root"},
		{"uid 0", "USER 65532:65532", "USER 0:0", "non-root"},
		{"no user", "USER 65532:65532\n", "", "runs as root"},
		{"remote ADD", "COPY build/terraformrc /etc/terraseed/terraformrc", "ADD https://example.com/terraformrc /etc/terraseed/terraformrc", "remote sources"},
		{"git ADD", "COPY . .", "ADD https://github.com/terraseed/terraseed.git .", "remote sources"},
		{"config elsewhere", "ENV TF_CLI_CONFIG_FILE=/etc/terraseed/terraformrc", "ENV TF_CLI_CONFIG_FILE=/etc/other", "not a file copied"},
		{"mirror elsewhere", "COPY --from=providers /mirror /opt/terraseed/plugins", "COPY --from=providers /mirror /opt/plugins", "not a directory the image copies"},
		{"env mirror differs", "TERRAFORM_PROVIDER_MIRROR=/opt/terraseed/plugins", "TERRAFORM_PROVIDER_MIRROR=/plugins", "TERRAFORM_PROVIDER_MIRROR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(text).To(ContainSubstring(c.old))
			d := parseDockerfile(t, strings.Replace(text, c.old, c.new, 1))
			g.Expect(ImageRules{ReadContextFile: readContext}.Check(d)).To(ContainElement(ContainSubstring(c.want)))
		})
	}
	t.Run("single stage", func(t *testing.T) {
		d := parseDockerfile(t, "FROM "+distroless+"\nUSER 65532\n")
		NewWithT(t).Expect(ImageRules{ReadContextFile: readContext}.Check(d)).To(ContainElement(ContainSubstring("multi-stage")))
	})
	t.Run("a mirror that allows downloads", func(t *testing.T) {
		_, err := FilesystemMirror([]byte("provider_installation {\n filesystem_mirror { path = \"/m\" }\n direct {}\n}\n"), "rc")
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("direct")))
	})
}

func versionsEnv(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "test/tools/versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	versions := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			versions[k] = v
		}
	}
	return versions
}

// The image bakes the versions the tests run against.
func TestPinsMatchTheTestedVersions(t *testing.T) {
	g := NewWithT(t)
	d := parseDockerfile(t, dockerfileText(t))
	versions := versionsEnv(t)

	g.Expect(StageEnv(d.Stage("terraform"))).To(HaveKeyWithValue("TERRAFORM_VERSION", versions["TERRAFORM_VERSION"]))
	g.Expect(versions["TERRAFORM_VERSION"]).To(Equal(terraformer.TerraformVersion))
	// The image mirrors the providers the templates require, at the versions they pin.
	providers, err := RequiredProviders(d, root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(providers).To(ContainElement("gavinbunney/kubectl@" + versions["KUBECTL_PROVIDER_VERSION"]))

	// The Go toolchain of every build stage satisfies go.mod.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	g.Expect(err).NotTo(HaveOccurred())
	var goLine string
	for _, line := range strings.Split(string(gomod), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			goLine = "go" + strings.TrimSpace(v)
		}
	}
	g.Expect(goLine).NotTo(BeEmpty())
	for _, s := range d.Stages[:len(d.Stages)-1] {
		tag := strings.TrimPrefix(strings.Split(s.BaseName, "@")[0], "golang:")
		goVersion := "go" + strings.Split(tag, "-")[0]
		g.Expect(version.IsValid(goVersion)).To(BeTrue(), s.BaseName)
		g.Expect(version.Compare(goVersion, goLine)).To(BeNumerically(">=", 0), "%s is older than go.mod's %s", s.BaseName, goLine)
	}
}

// TestImageBinaries runs the `go build` commands of the build stage as the image build
// runs them (the stage's environment, the same flags), into a temporary directory, and
// checks that the binaries are static, carry those flags and run.
func TestImageBinaries(t *testing.T) {
	g := NewWithT(t)
	d := parseDockerfile(t, dockerfileText(t))
	stage := d.Stage("build")
	g.Expect(stage).NotTo(BeNil())
	g.Expect(StageEnv(stage)).To(HaveKeyWithValue("CGO_ENABLED", "0"))

	start := time.Now()
	outputs, err := BuildStage(d, "build", root, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("the build stage's go builds: %s", time.Since(start).Round(time.Millisecond))
	built := map[string]string{}
	for stagePath, local := range outputs {
		built[filepath.Base(stagePath)] = local
	}
	g.Expect(built).To(HaveKey("terraseed"))
	g.Expect(built).To(HaveKey("terraformer"))

	for name, path := range built {
		f, err := elf.Open(path)
		g.Expect(err).NotTo(HaveOccurred())
		for _, p := range f.Progs {
			g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "%s asks for a dynamic loader", name)
			g.Expect(p.Type).NotTo(Equal(elf.PT_DYNAMIC), "%s is dynamically linked", name)
		}
		// -trimpath keeps -ldflags out of the build info; the sections show "-s -w".
		g.Expect(f.Section(".symtab")).To(BeNil(), "%s keeps its symbol table: -s was not applied", name)
		for _, section := range f.Sections {
			g.Expect(section.Name).NotTo(HavePrefix(".debug_"), "%s keeps DWARF: -w was not applied", name)
		}
		f.Close()

		info, err := buildinfo.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		g.Expect(settings).To(HaveKeyWithValue("CGO_ENABLED", "0"), name)
		g.Expect(settings).To(HaveKeyWithValue("-trimpath", "true"), name)
		g.Expect(info.Path).To(Equal("github.com/terraseed/terraseed/cmd/" + name))
	}

	help, err := exec.Command(built["terraseed"], "--help").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", help)
	g.Expect(string(help)).To(ContainSubstring("commands:"))
	runHelp, _ := exec.Command(built["terraseed"], "run", "--help").CombinedOutput()
	g.Expect(string(runHelp)).To(ContainSubstring("-terraformer-image"))
	// The pod executor runs `/terraformer <command> --plugin-mirror ...`.
	tfHelp, _ := exec.Command(built["terraformer"], "apply", "--help").CombinedOutput()
	g.Expect(string(tfHelp)).To(ContainSubstring("-plugin-mirror"))
}

// TestProviderMirror runs the providers stage's command as the image build runs it and
// shows that it mirrors every provider the templates require (those this machine cannot
// download it leaves out, and says so), that the providers it builds are the builds the
// tests use, byte for byte, and that terraform, configured with the image's CLI
// configuration, installs from the mirror offline.
func TestProviderMirror(t *testing.T) {
	g := NewWithT(t)
	tested := os.Getenv("TERRASEED_PROVIDER_MIRROR")
	tf := os.Getenv("TERRASEED_TERRAFORM")
	if tested == "" || tf == "" {
		t.Fatal("TERRASEED_PROVIDER_MIRROR and TERRASEED_TERRAFORM are not set: run `make test`, or eval \"$(make -s env)\" first")
	}
	d := parseDockerfile(t, dockerfileText(t))
	commands, err := ShellCommands(d.Stage("providers"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(commands).To(HaveLen(1))
	g.Expect(commands[0][:4]).To(Equal([]string{"go", "run", "./build/providers", "mirror"}))

	required, err := RequiredProviders(d, root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(required).To(ConsistOf("gavinbunney/kubectl@1.19.0", "hashicorp/aws@5.100.0"))

	mirror := filepath.Join(t.TempDir(), "mirror")
	var log bytes.Buffer
	stage, err := ProvidersStage(d, root, mirror, &log)
	t.Logf("the providers stage:\n%s", log.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stage).To(Equal(map[string]string{"/mirror": mirror}))

	var files, mirrored []string
	g.Expect(filepath.WalkDir(mirror, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// COPY keeps these modes, and the image's user is no owner of the files.
		info, err := e.Info()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.Mode().Perm()&0o005).To(Equal(os.FileMode(0o005)), "%s: others may read and enter or run it", path)
		if !e.IsDir() {
			rel, _ := filepath.Rel(mirror, path)
			files = append(files, rel)
			// registry.terraform.io/<namespace>/<type>/<version>/<os>_<arch>/<binary>
			parts := strings.Split(filepath.ToSlash(rel), "/")
			g.Expect(parts).To(HaveLen(6), rel)
			g.Expect(parts[0]).To(Equal("registry.terraform.io"))
			mirrored = append(mirrored, parts[1]+"/"+parts[2]+"@"+parts[3])
		}
		return err
	})).To(Succeed())
	// What the stage mirrored and what it left out are what the templates require.
	var leftOut []string
	for _, line := range strings.Split(log.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "left out "); ok {
			// left out <source> <version>: <why>
			words := strings.Fields(rest)
			g.Expect(len(words)).To(BeNumerically(">", 2), line)
			leftOut = append(leftOut, words[0]+"@"+strings.TrimSuffix(words[1], ":"))
		}
	}
	g.Expect(append(mirrored, leftOut...)).To(ConsistOf(required))
	g.Expect(leftOut).To(Or(BeEmpty(), Equal([]string{"hashicorp/aws@5.100.0"})), "only a release download may be left out")

	for _, rel := range files {
		if strings.HasPrefix(filepath.ToSlash(rel), "registry.terraform.io/hashicorp/") {
			continue // a release archive's binary, which the tests do not use
		}
		ours, err := os.ReadFile(filepath.Join(mirror, rel))
		g.Expect(err).NotTo(HaveOccurred())
		theirs, err := os.ReadFile(filepath.Join(tested, rel))
		g.Expect(err).NotTo(HaveOccurred(), "the tests' mirror has no %s", rel)
		g.Expect(bytes.Equal(ours, theirs)).To(BeTrue(), "%s differs from the tests' build", rel)
	}

	// The image's CLI configuration, with the mirror where this test built it.
	config, err := readContext("build/terraformrc")
	g.Expect(err).NotTo(HaveOccurred())
	baked, err := FilesystemMirror(config, "terraformrc")
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	rc := filepath.Join(dir, "terraformrc")
	g.Expect(os.WriteFile(rc, bytes.ReplaceAll(config, []byte(baked), []byte(mirror)), 0o600)).To(Succeed())
	work := filepath.Join(dir, "work")
	g.Expect(os.MkdirAll(work, 0o700)).To(Succeed())
	versions := versionsEnv(t)
	g.Expect(os.WriteFile(filepath.Join(work, "main.tf"), []byte(`terraform {
  required_providers {
    kubectl = {
      source  = "gavinbunney/kubectl"
      version = "`+versions["KUBECTL_PROVIDER_VERSION"]+`"
    }
  }
}
`), 0o600)).To(Succeed())
	init := exec.Command(tf, "init", "-input=false", "-no-color")
	init.Dir = work
	init.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "HOME="+dir, "TF_PLUGIN_CACHE_DIR=")
	output, err := init.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s", output)
	g.Expect(string(output)).To(ContainSubstring("Installing gavinbunney/kubectl v" + versions["KUBECTL_PROVIDER_VERSION"]))
}

// The assembly runs the providers stage only as the image build would run it.
func TestProvidersStageRefusesWhatItCannotFollow(t *testing.T) {
	text := dockerfileText(t)
	const run = `RUN go run ./build/providers mirror -out=/mirror -extra="${EXTRA_PROVIDERS}" templates`
	for _, c := range []struct{ name, old, new, want string }{
		{"a list kept by hand", run, "RUN mirror-providers /mirror gavinbunney/kubectl@1.19.0", "not one `go run"},
		{"templates elsewhere", "COPY templates templates", "COPY templates /templates", "is not at /src/templates"},
		{"no templates", run, "RUN go run ./build/providers mirror -out=/mirror", "no template directories"},
		{"a flag with a separate value", run, `RUN go run ./build/providers mirror -out=/mirror -extra "${EXTRA_PROVIDERS}" templates`, "-name=value"},
		{"two commands", run, run + " && ls /mirror", "not one `go run"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(text).To(ContainSubstring(c.old))
			_, err := RequiredProviders(parseDockerfile(t, strings.Replace(text, c.old, c.new, 1)), root)
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
}
