package infrastructure

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/state"
)

// keepSensitiveOutputs writes the outputs the configuration marks sensitive into a Secret
// owned by the Infrastructure, `<name>.infra.outputs`, and returns the others, the only
// ones the status may be built from.
func (op *operation) keepSensitiveOutputs(ctx context.Context, provider *templates.Provider, saved []byte) (map[string]any, error) {
	plain, sensitive, err := state.SplitOutputs(saved)
	if err != nil {
		return nil, err
	}
	for _, name := range provider.Manifest.Status.Outputs() {
		if _, ok := sensitive[name]; ok {
			return nil, extension.InvalidInput(ReasonInvalidConfiguration,
				"provider %s: status maps the output %q, which is sensitive: sensitive outputs go to the Secret %s, never to the status",
				provider.Manifest.Type, name, op.objects().ID.OutputsName())
		}
	}
	data := make(map[string][]byte, len(sensitive))
	for name, value := range sensitive {
		if s, ok := value.(string); ok {
			data[name] = []byte(s)
			continue
		}
		encoded, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("encoding the output %s: %w", name, err)
		}
		data[name] = encoded
	}
	if err := op.objects().WriteSensitiveOutputs(ctx, op.actuator.Client, op.infra, data); err != nil {
		return nil, err
	}
	return plain, nil
}
