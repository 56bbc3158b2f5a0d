package templates

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// Status is what a provider reports from terraform's outputs.
type Status struct {
	ProviderStatus *runtime.RawExtension
	NodesCIDR      *string
	EgressCIDRs    []string
}

// OutputError says terraform's outputs do not match what the provider declares.
type OutputError struct {
	Type   string
	Output string
	Reason string
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("provider %q: terraform output %q %s", e.Type, e.Output, e.Reason)
}

// Status maps terraform outputs (JSON-typed values) into the status the provider declares.
func (p *Provider) Status(outputs map[string]any) (*Status, error) {
	mapping := p.Manifest.Status
	providerStatus, err := providerStatus(p.Manifest.Type, mapping.ProviderStatus, outputs)
	if err != nil {
		return nil, err
	}
	out := &Status{ProviderStatus: providerStatus}

	if name := mapping.NodesCIDR; name != "" {
		switch v := outputs[name].(type) {
		case string:
			if v != "" {
				out.NodesCIDR = &v
			}
		case nil:
		default:
			return nil, &OutputError{Type: p.Manifest.Type, Output: name, Reason: fmt.Sprintf("must be a string, got %T", v)}
		}
	}
	if name := mapping.EgressCIDRs; name != "" {
		switch v := outputs[name].(type) {
		case []any:
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, &OutputError{Type: p.Manifest.Type, Output: name, Reason: fmt.Sprintf("must be a list of strings, holds %T", e)}
				}
				out.EgressCIDRs = append(out.EgressCIDRs, s)
			}
		case nil:
		default:
			return nil, &OutputError{Type: p.Manifest.Type, Output: name, Reason: fmt.Sprintf("must be a list of strings, got %T", v)}
		}
	}
	return out, nil
}

// providerStatus builds a providerStatus from outputs as mapping declares it.
func providerStatus(providerType string, mapping ProviderStatusMapping, outputs map[string]any) (*runtime.RawExtension, error) {
	status := map[string]any{
		"apiVersion": mapping.APIVersion,
		"kind":       mapping.Kind,
	}
	for _, f := range slices.Sorted(maps.Keys(mapping.Fields)) {
		output := mapping.Fields[f]
		value, ok := outputs[output]
		if !ok {
			return nil, &OutputError{Type: providerType, Output: output, Reason: "is missing"}
		}
		if err := setPath(status, strings.Split(f, "."), value); err != nil {
			return nil, &OutputError{Type: providerType, Output: output, Reason: err.Error()}
		}
	}
	raw, err := json.Marshal(status)
	if err != nil {
		return nil, &OutputError{Type: providerType, Output: "(all)", Reason: err.Error()}
	}
	return &runtime.RawExtension{Raw: raw}, nil
}

func setPath(obj map[string]any, path []string, value any) error {
	for _, key := range path[:len(path)-1] {
		next, ok := obj[key]
		if !ok {
			next = map[string]any{}
			obj[key] = next
		}
		child, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("cannot nest %q below a value", key)
		}
		obj = child
	}
	obj[path[len(path)-1]] = value
	return nil
}
