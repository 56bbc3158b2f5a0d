package terraformer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// benchResources is the size of the benchmark's configuration: as many ConfigMaps of the
// kubectl provider, each named after a terraform_data.
const benchResources = 20

// benchTerraformerEnv names a terraformer binary to benchmark instead of this tree's, to
// measure an earlier version side by side with this one on the same machine.
const benchTerraformerEnv = "TERRASEED_BENCH_TERRAFORMER"

// processPhases are the parts of a terraformer process's run, in order, each ending at
// the debug message named (or at the process's exit): process start (the runtime and the
// package initialisation), the API client's set-up, finding the terraform binary, reading
// the configuration, variables and state, the version check the reads did not hide,
// init, apply, the final save, and the report, the termination message and the exit.
var processPhases = []struct{ name, endsAt string }{
	{"start", "terraformerStarted"},
	{"client", "apiClientReady"},
	{"find", "terraformFound"},
	{"inputs", "inputsRead"},
	{"version", "versionChecked"},
	{"init", "terraformStarted"},
	{"apply", "terraformExited"},
	{"save", "stateSaved"},
	{"report", ""},
}

// BenchmarkTerraformerProcess compares a run pod's create with bare `terraform init &&
// terraform apply` of the same 20-resource configuration, in pairs whose order alternates:
// the terraformer binary started as a process with a run pod's flags and environment (a
// fresh working directory, the image's terraform found on PATH, the credentials in its
// environment, the pod's UID), reading its configuration, variables and state from the
// API server, saving the state and reporting there. Run it with twenty pairs
// (-benchtime 20x), as `make bench` does. It reports the median of the pairs' ratios and
// the median share of each phase of the terraformer's run (processPhases), from its debug
// messages.
func BenchmarkTerraformerProcess(b *testing.B) {
	binary := os.Getenv(benchTerraformerEnv)
	if binary == "" {
		binary = testenv.TerraformerBinary(b)
	}
	cliConfig := testenv.TerraformCLIConfig(b)
	var bare, terraformer []time.Duration
	shares := map[string][]float64{}
	for b.Loop() {
		f := newFixture(b, benchResources)
		bareDir := newBareConfig(b)
		runBare := func() time.Duration { return runBareTerraform(b, bareDir, cliConfig, f) }
		runTerraformer := func() time.Duration {
			took, phases := runTerraformerProcess(b, binary, f)
			for name, d := range phases {
				shares[name] = append(shares[name], d.Seconds()/took.Seconds())
			}
			return took
		}
		if len(bare)%2 == 0 {
			bare = append(bare, runBare())
			terraformer = append(terraformer, runTerraformer())
		} else {
			terraformer = append(terraformer, runTerraformer())
			bare = append(bare, runBare())
		}
		g := NewWithT(b)
		f.ExpectEachItemOnceInState(g, benchResources)
	}
	ratios := make([]float64, len(bare))
	for i := range bare {
		ratios[i] = terraformer[i].Seconds() / bare[i].Seconds()
	}
	b.ReportMetric(medianOf(secondsOf(bare)), "bare-s/op")
	b.ReportMetric(medianOf(secondsOf(terraformer)), "terraformer-s/op")
	b.ReportMetric(medianOf(ratios), "terraformer/bare")
	b.ReportMetric(slices.Min(ratios), "terraformer/bare-min")
	b.ReportMetric(slices.Max(ratios), "terraformer/bare-max")
	b.ReportMetric(float64(len(ratios)), "pairs")
	for _, phase := range processPhases {
		if s, ok := shares[phase.name]; ok {
			b.ReportMetric(medianOf(s), phase.name+"-share")
		}
	}
}

// newBareConfig writes the configuration and its variables into a new directory, as a
// user would, for a new namespace of their own.
func newBareConfig(b *testing.B) string {
	dir := b.TempDir()
	for name, content := range tftest.Config(b, "kubectl") {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	vars, _ := json.Marshal(map[string]any{"namespace": env.Namespace(b), "resources": benchResources})
	if err := os.WriteFile(filepath.Join(dir, state.VarsJSONKey), vars, 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

// runBareTerraform runs `terraform init && terraform apply` in dir with the providers of
// the mirror, and returns how long the two took.
func runBareTerraform(b *testing.B, dir, cliConfig string, f *fixture) time.Duration {
	environ := []string{"HOME=" + f.home, "TMPDIR=" + f.tmp, "PATH=" + os.Getenv("PATH"),
		"TF_VAR_kubeconfig=" + f.Kubeconfig, "TF_CLI_CONFIG_FILE=" + cliConfig, "TF_IN_AUTOMATION=1"}
	started := time.Now()
	for _, args := range [][]string{{"init", "-input=false"}, {"apply", "-auto-approve", "-input=false"}} {
		cmd := exec.Command(testenv.Terraform(b), args...)
		cmd.Dir, cmd.Env = dir, environ
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("terraform %v: %v\n%s", args, err, out)
		}
	}
	return time.Since(started)
}

// runTerraformerProcess runs f's create as a run pod's container does, and returns how
// long the process took and its phases.
func runTerraformerProcess(b *testing.B, binary string, f *fixture) (time.Duration, map[string]time.Duration) {
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := tftest.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		b.Fatal(err)
	}
	args := []string{"apply", "--namespace", f.Objects.ID.Namespace, "--name", f.Objects.ID.Name,
		"--work-dir", filepath.Join(dir, "work"),
		"--plugin-mirror", f.settings.Plugins.Mirror, "--plugin-cache-dir", filepath.Join(dir, "plugin-cache"),
		"--kubeconfig", kubeconfig, "--termination-message-path", filepath.Join(dir, "termination-log"),
		"--zap-log-level", "debug", "--zap-time-encoding", "rfc3339nano"}
	cmd := exec.Command(binary, args...)
	// The image's terraform is the one on PATH; the Secret's credentials and the pod's
	// UID are in the environment.
	cmd.Env = []string{"HOME=" + f.home, "TMPDIR=" + f.tmp, "PATH=" + filepath.Dir(testenv.Terraform(b)),
		"TF_VAR_kubeconfig=" + f.Kubeconfig, EnvPodUID + "=" + "bench-" + f.Namespace}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	err := cmd.Run()
	ended := time.Now()
	if err != nil {
		b.Fatalf("terraformer: %v\n%s\n%s", err, stderr.String(), stdout.String())
	}
	return ended.Sub(started), phasesOf(b, stderr.Bytes(), started, ended)
}

// phasesOf divides the time of a terraformer process between processPhases by the times
// of its debug messages; a phase whose message is missing takes no time.
func phasesOf(b *testing.B, log []byte, started, ended time.Time) map[string]time.Duration {
	at := map[string]time.Time{}
	scanner := bufio.NewScanner(bytes.NewReader(log))
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var entry struct {
			Msg string `json:"msg"`
			TS  string `json:"ts"`
		}
		if json.Unmarshal(scanner.Bytes(), &entry) != nil || entry.TS == "" {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, entry.TS)
		if err != nil {
			b.Fatal(fmt.Errorf("the time of %q: %w", entry.Msg, err))
		}
		if _, seen := at[entry.Msg]; !seen {
			at[entry.Msg] = ts
		}
	}
	phases := map[string]time.Duration{}
	last := started
	for _, phase := range processPhases {
		end, ok := at[phase.endsAt]
		if phase.endsAt == "" {
			end, ok = ended, true
		}
		if !ok {
			phases[phase.name] = 0
			continue
		}
		phases[phase.name] = end.Sub(last)
		last = end
	}
	return phases
}

func secondsOf(ds []time.Duration) []float64 {
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	return s
}

func medianOf(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
