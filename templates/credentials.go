package templates

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// OperatorOnlyCredentials are the keys of secret that the provider marks operatorOnly
// and the secret sets.
func (p *Provider) OperatorOnlyCredentials(secret *corev1.Secret) []string {
	var keys []string
	for _, c := range p.Manifest.Credentials {
		if c.OperatorOnly && secret != nil && len(secret.Data[c.Key]) > 0 {
			keys = append(keys, c.Key)
		}
	}
	return keys
}

// Credentials maps the credentials secret to the environment terraform runs with. The
// values must only ever reach a process environment, never a file, log or object.
func (p *Provider) Credentials(secret *corev1.Secret) (map[string]string, error) {
	if secret == nil {
		return nil, &ValidationError{Type: p.Manifest.Type, Errors: field.ErrorList{field.Required(field.NewPath("spec", "secretRef"), "the credentials secret is missing")}}
	}
	env := map[string]string{}
	var errs field.ErrorList
	for _, c := range p.Manifest.Credentials {
		value, ok := secret.Data[c.Key]
		if !ok || len(value) == 0 {
			if !c.Optional {
				errs = append(errs, field.Required(field.NewPath("data").Key(c.Key),
					fmt.Sprintf("the credentials secret %s/%s must hold this key", secret.Namespace, secret.Name)))
			}
			continue
		}
		env[c.EnvName()] = string(value)
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Type: p.Manifest.Type, Errors: errs}
	}
	return env, nil
}
