package infrastructure

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: op.infra.Namespace, Name: op.objects().ID.OutputsName()}}
	if len(sensitive) == 0 {
		if err := op.actuator.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("deleting the Secret of sensitive outputs: %w", err)
		}
		return plain, nil
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
	err = state.WriteObject(ctx, op.actuator.Client, secret, func() error {
		secret.Labels = op.objects().ID.Labels()
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = data
		return controllerutil.SetControllerReference(op.infra, secret, op.actuator.Client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("writing the Secret of sensitive outputs: %w", err)
	}
	return plain, nil
}
