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
// the configuration marks them sensitive. Outputs that would decode to more than
// maxOutputsExpansion times the state (and a MiB) are refused as invalid: decoded, a JSON value of a
// few bytes (`{}`) takes hundreds, and a state of such outputs within the bound would
// take the controller over its memory.
func SplitOutputs(state []byte) (plain, sensitive map[string]any, err error) {
	plain, sensitive = map[string]any{}, map[string]any{}
	if len(state) == 0 {
		return plain, sensitive, nil
	}
	var file struct {
		Version int `json:"version"`
		Outputs map[string]struct {
			Value     json.RawMessage `json:"value"`
			Sensitive bool            `json:"sensitive"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(state, &file); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if file.Version != 4 {
		return nil, nil, fmt.Errorf("%w: format version %d, want 4", ErrInvalid, file.Version)
	}
	// Decoded, the values take at most maxDecodedValueSize each, and their strings.
	values, size := 0, 0
	for _, output := range file.Outputs {
		values += jsonValues(output.Value)
		size += len(output.Value)
	}
	if values*maxDecodedValueSize+size > max(maxOutputsExpansion*len(state), minOutputsBudget) {
		return nil, nil, fmt.Errorf("%w: the outputs hold %d JSON values, which decode to more than %d times the state's %d bytes",
			ErrInvalid, values, maxOutputsExpansion, len(state))
	}
	for name, output := range file.Outputs {
		var value any
		if len(output.Value) > 0 {
			if err := json.Unmarshal(output.Value, &value); err != nil {
				return nil, nil, fmt.Errorf("%w: output %s: %v", ErrInvalid, name, err)
			}
		}
		if output.Sensitive {
			sensitive[name] = value
		} else {
			plain[name] = value
		}
	}
	return plain, sensitive, nil
}

const (
	// maxDecodedValueSize is the most encoding/json takes for one JSON value decoded into
	// an any: an object with a member, whose map takes a group of eight entries.
	maxDecodedValueSize = 400
	// maxOutputsExpansion is the most a state's outputs may take decoded, in times the
	// state's size: outputs are a small share of a state terraform writes.
	maxOutputsExpansion = 4
	// minOutputsBudget is what the outputs of any state may take decoded: a small state
	// has them take many times its size, and little.
	minOutputsBudget = 1 << 20
)

// jsonValues counts at least the JSON values of a valid document: one, and one for each
// array or object, and each separator, outside strings.
func jsonValues(raw []byte) int {
	n, inString, escaped := 1, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == ',' || c == '[' || c == '{':
			n++
		}
	}
	return n
}
