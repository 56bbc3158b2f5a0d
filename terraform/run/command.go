package run

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Command is a terraform command a run executes.
type Command string

const (
	Apply    Command = "apply"
	Destroy  Command = "destroy"
	Plan     Command = "plan"
	Validate Command = "validate"
)

// Commands are the commands a run accepts.
var Commands = []Command{Apply, Destroy, Plan, Validate}

// ParseCommand accepts one of Commands.
func ParseCommand(s string) (Command, error) {
	if !slices.Contains(Commands, Command(s)) {
		return "", InvalidInput("command", fmt.Sprintf("%q is not one of %v", s, Commands))
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
	Plan *PlanSummary
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
// protected type without being allowed to.
var ErrDestroyProtected = errors.New("the plan destroys or replaces protected resources")

// ProtectedError is the failure of an apply whose plan destroys or replaces resources of
// the protected types; allowed is the digest of the plan that was allowed, if any, which
// is not this one.
func ProtectedError(plan *PlanSummary, allowed string, protected []string) *Error {
	hits := plan.Destroys(protected)
	described := make([]string, len(hits))
	for i, h := range hits {
		described[i] = fmt.Sprintf("%s (%s)", h.Address, h.Action)
	}
	digest := plan.Digest
	message := fmt.Sprintf("%s: %s; nothing was changed", ErrDestroyProtected, listed(described, 20))
	if allowed != "" {
		message = fmt.Sprintf("%s; the plan allowed was %s, this plan is %s: its configuration or its changes differ", message, allowed, digest)
	}
	return &Error{Command: string(Apply), Message: message, Protected: true, PlanDigest: digest, Err: ErrDestroyProtected}
}

// TerraformVersion is the pinned terraform version: the last MPL release.
const TerraformVersion = "1.5.7"

// OpenTofuVersion is the pinned OpenTofu version, the alternative binary.
const OpenTofuVersion = "1.10.10"

// DefaultStopTimeout is how long terraform may take to stop after an interrupt before it is killed.
const DefaultStopTimeout = 10 * time.Minute

// DefaultFinalSaveTimeout bounds the retries of a run's last state save after terraform
// exited.
const DefaultFinalSaveTimeout = 2 * time.Minute

// StopBound is how long a run interrupted with the given stop timeout may take to end:
// terraform stops (or is killed) within the stop timeout, then the final save, and the
// runner's own exit. What waits for an interrupted run (a run pod's grace period, the
// controller's shutdown) waits as long.
func StopBound(stopTimeout time.Duration) time.Duration {
	return stopTimeout + DefaultFinalSaveTimeout + 10*time.Second
}
