package state

import (
	"encoding/json"
	"fmt"
)

// Outputs returns the root module outputs of a state (format version 4) with their JSON
// types: string, float64, bool, []any, map[string]any. An empty state has no outputs.
func Outputs(state []byte) (map[string]any, error) {
	outputs := map[string]any{}
	if len(state) == 0 {
		return outputs, nil
	}
	var file struct {
		Version int `json:"version"`
		Outputs map[string]struct {
			Value any `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(state, &file); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidState, err)
	}
	if file.Version != 4 {
		return nil, fmt.Errorf("%w: format version %d, want 4", ErrInvalidState, file.Version)
	}
	for name, output := range file.Outputs {
		outputs[name] = output.Value
	}
	return outputs, nil
}
