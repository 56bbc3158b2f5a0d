package terraform

import (
	"encoding/json"
	"errors"
	"os"
	"time"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// terminationMessage is what a run pod leaves in its termination message: how long its
// phases took and, for a failed run, enough for the executor to rebuild the RunError;
// small enough for the kubelet's 4 KiB limit.
type terminationMessage struct {
	Command   string                         `json:"command,omitempty"`
	Codes     []extensionsv1alpha1.ErrorCode `json:"codes,omitempty"`
	Message   string                         `json:"message,omitempty"`
	Retryable bool                           `json:"retryable,omitempty"`
	// InProgress marks a run refused because another one holds the Infrastructure.
	InProgress bool `json:"inProgress,omitempty"`
	// Phases are in seconds.
	Phases map[string]float64 `json:"phases,omitempty"`
}

const terminationMessageLimit = 4096

// WriteTerminationMessage records at path how a run ended: the phases it ran and, when
// runErr is not nil, why it failed.
func WriteTerminationMessage(path string, phases Phases, runErr error) error {
	msg := terminationMessage{}
	var re *RunError
	switch {
	case errors.As(runErr, &re):
		msg = terminationMessage{Command: re.Command, Codes: re.Codes, Message: re.Message, Retryable: re.Retryable, InProgress: errors.Is(runErr, ErrRunInProgress)}
	case runErr != nil:
		msg = terminationMessage{Message: runErr.Error(), Retryable: true}
	}
	if len(phases) > 0 {
		msg.Phases = map[string]float64{}
		for name, d := range phases {
			msg.Phases[name] = d.Seconds()
		}
	}
	for {
		data, err := json.Marshal(msg)
		if err != nil {
			return err
		}
		if len(data) <= terminationMessageLimit || len(msg.Message) < 64 {
			return os.WriteFile(path, data, 0o644)
		}
		msg.Message = truncate(msg.Message[:len(msg.Message)/2], len(msg.Message)/2)
	}
}

// parseTerminationMessage reads a termination message: the phases of the run, and the
// RunError of a failed run; ok is false when the message is not one of a failed run (the
// run succeeded, or the pod died before writing one).
func parseTerminationMessage(data string) (phases Phases, runErr *RunError, ok bool) {
	var msg terminationMessage
	if err := json.Unmarshal([]byte(data), &msg); err != nil {
		return nil, nil, false
	}
	if len(msg.Phases) > 0 {
		phases = Phases{}
		for name, seconds := range msg.Phases {
			phases[name] = time.Duration(seconds * float64(time.Second))
		}
	}
	if msg.Message == "" {
		return phases, nil, false
	}
	cause := ErrTerraformFailed
	if msg.InProgress {
		cause = ErrRunInProgress
	}
	return phases, &RunError{Command: msg.Command, Codes: msg.Codes, Message: msg.Message, Retryable: msg.Retryable, Phases: phases, err: cause}, true
}
