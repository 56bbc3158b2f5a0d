package terraform

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Executor runs a terraform command for an Infrastructure somewhere: in a pod, or on this machine.
type Executor interface {
	Run(ctx context.Context, req Request) (*Result, error)
}

// Request is one terraform run.
type Request struct {
	// Namespace and Name are the Infrastructure's.
	Namespace, Name string
	// Owner becomes the owner of a run pod and its credentials Secret, so that deleting
	// the Infrastructure collects them.
	Owner   *metav1.OwnerReference
	Command Command
	// Env holds credentials, e.g. TF_VAR_kubeconfig or AWS_ACCESS_KEY_ID. It reaches
	// terraform's environment and nothing else.
	Env map[string]string
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate names the field of a request that can never run.
func (r Request) Validate() error {
	if err := r.objects().Validate(); err != nil {
		return err
	}
	if _, err := ParseCommand(string(r.Command)); err != nil {
		return err
	}
	for k := range r.Env {
		if !envName.MatchString(k) {
			return invalidInput(fmt.Sprintf("env[%q]", k), "is not an environment variable name")
		}
	}
	return nil
}

func (r Request) objects() RunObjects { return RunObjects{Namespace: r.Namespace, Name: r.Name} }

// runGuard admits at most one run per Infrastructure within this process.
type runGuard struct {
	mu      sync.Mutex
	running map[string]bool
}

func (g *runGuard) acquire(r Request) (func(), error) {
	key := r.Namespace + "/" + r.Name
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[key] {
		return nil, &RunError{Command: string(r.Command), Message: ErrRunInProgress.Error(), Retryable: true, err: ErrRunInProgress}
	}
	if g.running == nil {
		g.running = map[string]bool{}
	}
	g.running[key] = true
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.running, key)
	}, nil
}
