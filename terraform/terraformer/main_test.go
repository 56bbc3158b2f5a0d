package terraformer

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/run/termination"
	"github.com/terraseed/terraseed/test/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	// What the runs log is not what these tests look at; their output is.
	logf.SetLogger(logr.Discard())
	os.Exit(testenv.Run(m, &env))
}

// fixture is one Infrastructure in its own namespace, with the test configuration
// written to its run objects, and the place its runs run in.
type fixture struct {
	*tftest.Infra
	// settings go to every run, as an executor's do.
	settings Settings
	// workDir is the runs' working directory; a test that starts over where a new run pod
	// would, with nothing left by earlier runs, gives it a new one.
	workDir string
	// reportFile is where the runs report their progress and plan, as a local run does.
	reportFile string
	// home and tmp are the runs' HOME and TMPDIR.
	home, tmp string
}

func newFixture(t testing.TB, resources int) *fixture {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	f := &fixture{
		Infra: tftest.NewInfra(t, env, resources),
		settings: Settings{
			Terraform: testenv.Terraform(t),
			Plugins:   Plugins{Mirror: testenv.ProviderMirror(t)},
		},
		workDir:    filepath.Join(dir, "work"),
		reportFile: filepath.Join(dir, "report.json"),
		home:       filepath.Join(dir, "home"),
	}
	g.Expect(os.Mkdir(f.home, 0o700)).To(Succeed())
	// A short path: provider plugins put their sockets there, whose paths are bounded.
	tmp, err := os.MkdirTemp("", "terraseed-run-")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	f.tmp = tmp
	return f
}

// runner is the Runner of command, made as the local executor makes it.
func (f *fixture) runner(command run.Command) *Runner {
	return &Runner{
		Client:  env.Client,
		Objects: f.Objects,
		Command: command,
		WorkDir: f.workDir,
		// The local executor's: its working directory outlives the run.
		StateSaveInterval: time.Second,
		Settings:          f.settings,
		Stdout:            f.Output,
		Stderr:            f.Output,
		ReportFile:        f.reportFile,
		Env:               f.env(),
	}
}

// env is a run's environment: a process's needs, the run's own HOME and TMPDIR, and the
// kubectl provider's credentials, never this process's own.
func (f *fixture) env() []string {
	env := []string{"HOME=" + f.home, "TMPDIR=" + f.tmp, "TF_VAR_kubeconfig=" + f.Kubeconfig}
	if v, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+v)
	}
	return env
}

func (f *fixture) run(command run.Command) (*run.Result, error) {
	return f.runWith(context.Background(), f.runner(command))
}

// runWith runs r as an executor does: what an earlier run reported is cleared first, and
// a failed run's error carries the phases the run got through, as the local executor
// adds them and a run pod's termination message holds them.
func (f *fixture) runWith(ctx context.Context, r *Runner) (*run.Result, error) {
	if err := report.File(f.reportFile).Clear(ctx); err != nil {
		return nil, err
	}
	result, err := r.Run(ctx)
	if err != nil {
		return nil, termination.ErrorOf(r.Phases(), err)
	}
	return result, nil
}
