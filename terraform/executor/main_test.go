package executor

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/internal/tftest"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/terraformer"
	"github.com/terraseed/terraseed/test/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	if os.Getenv("TERRASEED_TEST_HELPER_RUN") != "" {
		os.Exit(runHelper())
	}
	// What the executors log is not what these tests look at; the runs' output is.
	logf.SetLogger(logr.Discard())
	os.Exit(testenv.Run(m, &env))
}

// fixture is one Infrastructure in its own namespace, with the test configuration
// written to its run objects and a local executor for it.
type fixture struct {
	*tftest.Infra
	executor *LocalExecutor
}

func newFixture(t testing.TB, resources int) *fixture {
	t.Helper()
	f := &fixture{Infra: tftest.NewInfra(t, env, resources)}
	f.executor = &LocalExecutor{
		Client: env.Client,
		Settings: terraformer.Settings{
			Terraform: testenv.Terraform(t),
			Plugins:   terraformer.Plugins{Mirror: testenv.ProviderMirror(t)},
		},
		BaseDir: t.TempDir(),
		Output:  f.Output,
	}
	return f
}

func (f *fixture) request(command run.Command) run.Request {
	return run.Request{ID: f.Objects.ID, Command: command, Env: map[string]string{"TF_VAR_kubeconfig": f.Kubeconfig}}
}

func (f *fixture) run(command run.Command) (*run.Result, error) {
	return f.executor.Run(context.Background(), f.request(command))
}
