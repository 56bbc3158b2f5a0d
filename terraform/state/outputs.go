package state

import (
	"encoding/json"
	"fmt"
)

// Outputs returns the root module outputs of a state (format version 4) with their JSON
// types: string, float64, bool, []any, map[string]any. An empty state has no outputs.
func Outputs(state []byte) (map[string]any, error) {
	plain, sensitive, err := SplitOutputs(state)
	if err != nil {
		return nil, err
	}
	for name, value := range sensitive {
		plain[name] = value
	}
	return plain, nil
}

// SplitOutputs returns the root module outputs of a state, JSON-typed, apart by whether
// the configuration marks them sensitive.
func SplitOutputs(state []byte) (plain, sensitive map[string]any, err error) {
	plain, sensitive = map[string]any{}, map[string]any{}
	if len(state) == 0 {
		return plain, sensitive, nil
	}
	var file struct {
		Version int `json:"version"`
		Outputs map[string]struct {
			Value     any  `json:"value"`
			Sensitive bool `json:"sensitive"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(state, &file); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if file.Version != 4 {
		return nil, nil, fmt.Errorf("%w: format version %d, want 4", ErrInvalid, file.Version)
	}
	for name, output := range file.Outputs {
		if output.Sensitive {
			sensitive[name] = output.Value
		} else {
			plain[name] = output.Value
		}
	}
	return plain, sensitive, nil
}
