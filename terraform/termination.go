package terraform

import (
	"encoding/json"
	"errors"
	"os"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// terminationMessage is what a run pod leaves in its termination message: enough for the
// executor to rebuild the RunError, and small enough for the kubelet's 4 KiB limit.
type terminationMessage struct {
	Command   string                         `json:"command,omitempty"`
	Codes     []extensionsv1alpha1.ErrorCode `json:"codes,omitempty"`
	Message   string                         `json:"message"`
	Retryable bool                           `json:"retryable"`
	// InProgress marks a run refused because another one holds the Infrastructure.
	InProgress bool `json:"inProgress,omitempty"`
}

const terminationMessageLimit = 4096

// WriteTerminationMessage records a failed run's error at path.
func WriteTerminationMessage(path string, runErr error) error {
	msg := terminationMessage{Message: runErr.Error(), Retryable: true}
	var re *RunError
	if errors.As(runErr, &re) {
		msg = terminationMessage{Command: re.Command, Codes: re.Codes, Message: re.Message, Retryable: re.Retryable, InProgress: errors.Is(runErr, ErrRunInProgress)}
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

// parseTerminationMessage rebuilds the RunError of a termination message; ok is false
// when the message is not one (the pod died before writing it).
func parseTerminationMessage(data string) (*RunError, bool) {
	var msg terminationMessage
	if err := json.Unmarshal([]byte(data), &msg); err != nil || msg.Message == "" {
		return nil, false
	}
	cause := ErrTerraformFailed
	if msg.InProgress {
		cause = ErrRunInProgress
	}
	return &RunError{Command: msg.Command, Codes: msg.Codes, Message: msg.Message, Retryable: msg.Retryable, err: cause}, true
}
