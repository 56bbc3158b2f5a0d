package executor

import (
	"context"
	"sync"

	"github.com/terraseed/terraseed/terraform/run"
)

// Executor runs a terraform command somewhere: in a pod, or on this machine.
type Executor interface {
	Run(ctx context.Context, req run.Request) (*run.Result, error)
}

// activityChecker is an executor that can tell whether a run of an ID is under way,
// also one that an earlier process started: a run pod still running, a terraformer
// process still holding its run directory.
type activityChecker interface {
	Active(ctx context.Context, id run.ID) (bool, error)
}

// stopper is an executor whose runs go on elsewhere after Run's context ends, such as in
// a run pod: Stop stops the run of id under way, also one an earlier process started, as
// a shutdown does: terraform is interrupted and the state it leaves is saved; a terraform
// that does not stop within the stop timeout (a create that hangs) is killed, with what
// it recorded saved already. Stop returns once the stop is asked for; the run is under
// way (activityChecker) until it ended.
type stopper interface {
	Stop(ctx context.Context, id run.ID) error
}

// cleaner is an executor that keeps something of an object's runs beyond its run objects,
// such as a local run directory: Clean removes it once the object is gone.
type cleaner interface {
	Clean(ctx context.Context, id run.ID) error
}

// runGuard admits at most one run per run ID within this process.
type runGuard struct {
	mu      sync.Mutex
	running map[run.ID]bool
}

func (g *runGuard) acquire(r run.Request) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[r.ID] {
		return nil, inProgress(r.Command, run.ErrRunInProgress.Error())
	}
	if g.running == nil {
		g.running = map[run.ID]bool{}
	}
	g.running[r.ID] = true
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.running, r.ID)
	}, nil
}

// inProgress refuses a run because another one holds its objects.
func inProgress(command run.Command, message string) error {
	return &run.Error{Command: string(command), Message: message, Err: run.ErrRunInProgress}
}
