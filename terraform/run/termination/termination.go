package termination

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/terraseed/terraseed/terraform/run"
)

// terminationMessage is what a run pod leaves in its termination message: how long its
// phases took and, for a failed run, enough to rebuild the Error; small enough for
// the kubelet's 4 KiB limit.
type terminationMessage struct {
	Command string   `json:"command,omitempty"`
	Blocks  []string `json:"blocks,omitempty"`
	// Message is left out when it is the blocks joined, and rebuilt from them.
	Message string `json:"message,omitempty"`
	Invalid bool   `json:"invalid,omitempty"`
	// InProgress marks a run refused because another run of the same ID holds its objects.
	InProgress bool `json:"inProgress,omitempty"`
	// Protected marks a run refused because its plan destroys protected resources.
	Protected bool `json:"protected,omitempty"`
	// PlanDigest is the digest of the plan a Protected run refused.
	PlanDigest string `json:"planDigest,omitempty"`
	// Phases are in seconds.
	Phases map[string]float64 `json:"phases,omitempty"`
	// Codes mark the message of a run pod of an earlier version as terraform's error
	// blocks joined, which it wrote instead of the blocks.
	Codes []string `json:"codes,omitempty"`
	// Record is when the run pod's terraformer ran, and its container's peak memory.
	Record *podRecordJSON `json:"record,omitempty"`
}

// Record is what a run pod's terraformer tells of its own run besides the phases: when
// it started, started terraform and ended, and the most memory its container used. The
// executor reads a run pod's overhead from it: the times are the node's clock.
type Record struct {
	Started, TerraformStarted, Ended time.Time
	// PeakMemory is the container's peak memory in bytes, terraform and its providers
	// included; 0 when the cgroup does not tell.
	PeakMemory int64
}

// podRecordJSON is a Record in a termination message: Unix milliseconds, 0 for a time
// not reached (a run that failed before terraform started).
type podRecordJSON struct {
	Started          int64 `json:"started"`
	TerraformStarted int64 `json:"terraform,omitempty"`
	Ended            int64 `json:"ended"`
	PeakMemory       int64 `json:"peakMemory,omitempty"`
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

const terminationMessageLimit = 4096

// writeMessage records at path how a run ended: the phases it ran and, when
// runErr is not nil, why it failed.
func writeMessage(path string, phases run.Phases, runErr error) error {
	return Write(path, phases, nil, runErr)
}

// Write is writeMessage with the run pod's record, when not nil.
func Write(path string, phases run.Phases, record *Record, runErr error) error {
	msg := newTerminationMessage(phases, runErr)
	if record != nil {
		msg.Record = &podRecordJSON{Started: unixMilli(record.Started), TerraformStarted: unixMilli(record.TerraformStarted),
			Ended: unixMilli(record.Ended), PeakMemory: record.PeakMemory}
	}
	for {
		data, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		switch {
		case len(data) <= terminationMessageLimit:
			return os.WriteFile(path, data, 0o644)
		case len(msg.Message) >= 64:
			msg.Message = msg.Message[:len(msg.Message)/2]
		case len(msg.Blocks) > 1:
			// The first blocks say most: terraform stops at its first errors.
			msg.Blocks = msg.Blocks[:len(msg.Blocks)-1]
		default:
			return os.WriteFile(path, data, 0o644)
		}
	}
}

// ErrorOf is the error of a run that failed with err, as the executor of a run pod
// reads it back from the pod's termination message (Parse): for a run
// in the executor's own process, which has no termination message to go through.
func ErrorOf(phases run.Phases, err error) *run.Error {
	if re, ok := newTerminationMessage(phases, err).runError(); ok {
		return re
	}
	return run.NewError("", "", err)
}

func newTerminationMessage(phases run.Phases, runErr error) terminationMessage {
	msg := terminationMessage{}
	var re *run.Error
	switch {
	case errors.As(runErr, &re):
		msg = terminationMessage{Command: re.Command, Blocks: re.Blocks, Message: re.Message, PlanDigest: re.PlanDigest}
	case runErr != nil:
		msg = terminationMessage{Message: runErr.Error()}
	}
	msg.Invalid = errors.Is(runErr, run.ErrInvalidInput)
	msg.InProgress = errors.Is(runErr, run.ErrRunInProgress)
	msg.Protected = errors.Is(runErr, run.ErrDestroyProtected)
	if len(msg.Blocks) > 0 && msg.Message == messageOf(msg.Blocks) {
		msg.Message = ""
	}
	if len(phases) > 0 {
		msg.Phases = map[string]float64{}
		for name, d := range phases {
			msg.Phases[name] = d.Seconds()
		}
	}
	return msg
}

// Parse reads a termination message: the phases of the run, and the
// Error of a failed run; ok is false when the message is not one of a failed run (the
// run succeeded, or the pod died before writing one).
func Parse(data string) (phases run.Phases, runErr *run.Error, ok bool) {
	var msg terminationMessage
	if err := json.Unmarshal([]byte(data), &msg); err != nil {
		return nil, nil, false
	}
	runErr, ok = msg.runError()
	return msg.phases(), runErr, ok
}

// ParseRecord reads the run pod's record of a termination message; false when it
// holds none (a terraformer of an earlier version, or one killed before it wrote it).
func ParseRecord(data string) (Record, bool) {
	var msg terminationMessage
	if err := json.Unmarshal([]byte(data), &msg); err != nil || msg.Record == nil {
		return Record{}, false
	}
	r := msg.Record
	return Record{Started: fromUnixMilli(r.Started), TerraformStarted: fromUnixMilli(r.TerraformStarted),
		Ended: fromUnixMilli(r.Ended), PeakMemory: r.PeakMemory}, true
}

func (msg terminationMessage) phases() run.Phases {
	if len(msg.Phases) == 0 {
		return nil
	}
	phases := run.Phases{}
	for name, seconds := range msg.Phases {
		phases[name] = time.Duration(seconds * float64(time.Second))
	}
	return phases
}

// runError is the Error of a failed run's message; ok is false for any other.
func (msg terminationMessage) runError() (*run.Error, bool) {
	if len(msg.Blocks) == 0 && len(msg.Codes) > 0 {
		msg.Blocks = []string{msg.Message}
	}
	if msg.Message == "" {
		msg.Message = messageOf(msg.Blocks)
	}
	if msg.Message == "" {
		return nil, false
	}
	cause := run.ErrTerraformFailed
	switch {
	case msg.InProgress:
		cause = run.ErrRunInProgress
	case msg.Invalid:
		cause = run.ErrInvalidInput
	case msg.Protected:
		cause = run.ErrDestroyProtected
	}
	return &run.Error{Command: msg.Command, Blocks: msg.Blocks, Message: msg.Message, Invalid: msg.Invalid, Protected: msg.Protected, PlanDigest: msg.PlanDigest, Phases: msg.phases(), Err: cause}, true
}

// messageOf is the message run's errors make of blocks.
func messageOf(blocks []string) string { return run.ErrorOfBlocks("", blocks, nil).Message }
