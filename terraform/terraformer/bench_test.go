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
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/procfs"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// benchResources is the size of the benchmark's configuration: as many ConfigMaps of the
// kubectl provider, each named after a terraform_data.
const benchResources = 20

// benchBeforeEnv names terraformer binaries of earlier versions (or variants), comma
// separated, to run in each iteration too, in turns with the others, so that the figures
// before and after a change are measured side by side under the same load (before/bare,
// or before1/bare, before2/bare ... for more than one).
const benchBeforeEnv = "TERRASEED_BENCH_TERRAFORMER_BEFORE"

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
// (-benchtime 20x), as `make bench` does. It reports the median of the pairs' ratios (of
// the times, and of the processor times), and the median share of each phase of the
// terraformer's run (processPhases), from its debug messages, and the processor time the
// API server and etcd spent during each contender's runs: the terraformer's requests cost
// the seed's control plane, which shares the machine's cores with terraform here. With
// TERRASEED_BENCH_TERRAFORMER_BEFORE, earlier terraformers take their turns in each
// iteration too (before/bare).
func BenchmarkTerraformerProcess(b *testing.B) {
	cliConfig := testenv.TerraformCLIConfig(b)
	contenders := []*contender{{name: "bare"}, {name: "terraformer", binary: testenv.TerraformerBinary(b)}}
	befores := slices.DeleteFunc(strings.Split(os.Getenv(benchBeforeEnv), ","), func(s string) bool { return s == "" })
	for i, before := range befores {
		name := "before"
		if len(befores) > 1 {
			name = fmt.Sprintf("before%d", i+1)
		}
		contenders = append(contenders, &contender{name: name, binary: before})
	}
	bare := contenders[0]
	round := 0
	for b.Loop() {
		// Each its own namespace, as the first in turn in one iteration, the last in another.
		for i := range contenders {
			c := contenders[(round+i)%len(contenders)]
			f := newFixture(b, benchResources)
			before := controlPlaneCPU(b)
			if c.binary == "" {
				c.runBare(b, f, cliConfig)
			} else {
				c.runTerraformer(b, f)
			}
			c.controlPlane = append(c.controlPlane, (controlPlaneCPU(b) - before).Seconds())
			if c.binary != "" {
				f.ExpectEachItemOnceInState(NewWithT(b), benchResources)
			}
		}
		round++
	}
	b.ReportMetric(medianOf(bare.totals), "bare-s/op")
	b.ReportMetric(medianOf(bare.cpu), "bare-cpu-s/op")
	b.ReportMetric(medianOf(bare.controlPlane), "bare-apiserver-cpu-s/op")
	for _, c := range contenders[1:] {
		ratios, cpuRatios := make([]float64, len(bare.totals)), make([]float64, len(bare.totals))
		for i := range bare.totals {
			ratios[i], cpuRatios[i] = c.totals[i]/bare.totals[i], c.cpu[i]/bare.cpu[i]
		}
		b.ReportMetric(medianOf(c.totals), c.name+"-s/op")
		b.ReportMetric(medianOf(ratios), c.name+"/bare")
		b.ReportMetric(slices.Min(ratios), c.name+"/bare-min")
		b.ReportMetric(slices.Max(ratios), c.name+"/bare-max")
		b.ReportMetric(medianOf(c.cpu), c.name+"-cpu-s/op")
		// Less touched by what else the machine runs than the times.
		b.ReportMetric(medianOf(cpuRatios), c.name+"-cpu/bare-cpu")
		b.ReportMetric(medianOf(c.controlPlane), c.name+"-apiserver-cpu-s/op")
		b.Logf("%s: median times: %s", c.name, c.medians())
	}
	b.Logf("bare: median times: %s", bare.medians())
	b.ReportMetric(float64(len(bare.totals)), "pairs")
	this := contenders[1]
	for _, phase := range processPhases {
		b.ReportMetric(medianOf(this.shares[phase.name]), phase.name+"-share")
	}
}

// contender is one side of the comparison: bare terraform (no binary) or a terraformer
// binary, with the times of its runs in seconds.
type contender struct {
	name, binary string
	totals       []float64
	// cpu is the processor time of the process and the processes it waited for
	// (terraform and its providers), which a busy machine makes wait.
	cpu []float64
	// controlPlane is the processor time the API server and etcd spent during the run:
	// what a run's requests cost the seed, on the same machine's cores.
	controlPlane []float64
	// times and shares are those of each phase, by name.
	times, shares map[string][]float64
}

func (c *contender) add(total, cpu time.Duration, phases map[string]time.Duration) {
	if c.times == nil {
		c.times, c.shares = map[string][]float64{}, map[string][]float64{}
	}
	c.totals, c.cpu = append(c.totals, total.Seconds()), append(c.cpu, cpu.Seconds())
	for name, d := range phases {
		c.times[name] = append(c.times[name], d.Seconds())
		c.shares[name] = append(c.shares[name], d.Seconds()/total.Seconds())
	}
}

func (c *contender) runBare(b *testing.B, f *fixture, cliConfig string) {
	dir := newBareConfig(b, f.Namespace)
	init, apply, cpu := runBareTerraform(b, dir, cliConfig, f)
	c.add(init+apply, cpu, map[string]time.Duration{"init": init, "apply": apply})
}

func (c *contender) runTerraformer(b *testing.B, f *fixture) {
	c.add(runTerraformerProcess(b, c.binary, f))
}

// medians lists the median time of each phase.
func (c *contender) medians() string {
	var medians []string
	for _, phase := range processPhases {
		if times, ok := c.times[phase.name]; ok {
			medians = append(medians, fmt.Sprintf("%s %.1f ms", phase.name, medianOf(times)*1000))
		}
	}
	return strings.Join(medians, ", ")
}

// newBareConfig writes the configuration and its variables for namespace into a new
// directory, as a user would.
func newBareConfig(b *testing.B, namespace string) string {
	dir := b.TempDir()
	for name, content := range tftest.Config(b, "kubectl") {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	vars, _ := json.Marshal(map[string]any{"namespace": namespace, "resources": benchResources})
	if err := os.WriteFile(filepath.Join(dir, state.VarsJSONKey), vars, 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}

// runBareTerraform runs `terraform init && terraform apply` in dir with the providers of
// the mirror, and returns how long each took.
func runBareTerraform(b *testing.B, dir, cliConfig string, f *fixture) (init, apply, cpu time.Duration) {
	environ := []string{"HOME=" + f.home, "TMPDIR=" + f.tmp, "PATH=" + os.Getenv("PATH"),
		"TF_VAR_kubeconfig=" + f.Kubeconfig, "TF_CLI_CONFIG_FILE=" + cliConfig, "TF_IN_AUTOMATION=1"}
	run := func(args ...string) time.Duration {
		cmd := exec.Command(testenv.Terraform(b), args...)
		cmd.Dir, cmd.Env = dir, environ
		started := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("terraform %v: %v\n%s", args, err, out)
		}
		took := time.Since(started)
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return took
	}
	init = run("init", "-input=false")
	apply = run("apply", "-auto-approve", "-input=false")
	return init, apply, cpu
}

// runTerraformerProcess runs f's create as a run pod's container does, and returns how
// long the process took and its phases.
func runTerraformerProcess(b *testing.B, binary string, f *fixture) (took, cpu time.Duration, phases map[string]time.Duration) {
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
	cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return ended.Sub(started), cpu, phasesOf(b, stderr.Bytes(), started, ended)
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

// controlPlaneCPU is the processor time the test environment's API server and etcd, this
// process's children, have spent so far.
func controlPlaneCPU(b *testing.B) time.Duration {
	procs, err := procfs.AllProcs()
	if err != nil {
		b.Fatal(err)
	}
	var ticks uint
	for _, p := range procs {
		stat, err := p.Stat()
		if err != nil || stat.PPID != os.Getpid() || stat.Comm != "kube-apiserver" && stat.Comm != "etcd" {
			continue
		}
		ticks += stat.UTime + stat.STime
	}
	if ticks == 0 {
		b.Fatal("no API server or etcd among this process's children")
	}
	// procfs counts in USER_HZ, 100 a second on Linux.
	return time.Duration(ticks) * time.Second / 100
}
