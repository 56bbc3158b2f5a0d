package run

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/terraseed/terraseed/terraform/run/plan"
)

// Command is a terraform command a run executes.
type Command string

const (
	Apply    Command = "apply"
	Destroy  Command = "destroy"
	Plan     Command = "plan"
	Validate Command = "validate"
)

// commands are the commands a run accepts.
var commands = []Command{Apply, Destroy, Plan, Validate}

// ParseCommand accepts one of commands.
func ParseCommand(s string) (Command, error) {
	if !slices.Contains(commands, Command(s)) {
		return "", InvalidInput("command", fmt.Sprintf("%q is not one of %v", s, commands))
	}
	return Command(s), nil
}

// WritesState says whether the command writes state, and so must keep it safe.
func (c Command) WritesState() bool { return c == Apply || c == Destroy }

// Result is the outcome of a successful run.
type Result struct {
	// Outputs are the root module outputs of the saved state, JSON-typed.
	Outputs map[string]any
	// State is the saved state the outputs were read from; executors fill it in.
	State []byte
	// Changes is whether a plan found changes to make.
	Changes bool
	// Plan is what the plan of an apply or a plan run found; executors fill it in.
	Plan *plan.Summary
	// StateWrites is how many times the state was written to the API server.
	StateWrites int
	// Phases is how long each terraform command of the run took.
	Phases Phases
}

// Phases maps the terraform commands of a run to how long each took: "init" (left out when
// the working directory is initialised for the configuration already), then "apply",
// "destroy", "plan" or "validate"; an apply that checks its plan first runs "plan", and
// "apply" only when the plan changes anything. A failed run holds the ones it started.
type Phases map[string]time.Duration

// ErrDestroyProtected is returned when an apply would destroy or replace a resource of a
// protected type, or one it imports, without being allowed to.
var ErrDestroyProtected = errors.New("the plan destroys or replaces protected resources")
