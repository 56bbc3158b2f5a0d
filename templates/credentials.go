package templates

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// The label and the keys of a Secret that gardenlet fills for a WorkloadIdentity (a
// CredentialsBinding that names one): a short-lived token it renews at about half its
// lifetime, and the WorkloadIdentity's provider config.
const (
	purposeLabel                     = "security.gardener.cloud/purpose"
	purposeWorkloadIdentityRequestor = "workload-identity-token-requestor"
)

// IsWorkloadIdentity says whether secret holds a WorkloadIdentity's token (Gardener's
// label security.gardener.cloud/purpose=workload-identity-token-requestor): the
// provider's workloadIdentity credentials apply to it, not its static ones.
func IsWorkloadIdentity(secret *corev1.Secret) bool {
	return secret != nil && secret.Labels[purposeLabel] == purposeWorkloadIdentityRequestor
}

// credentialsFor are the credentials the provider declares for secret's kind.
func (p *Provider) credentialsFor(secret *corev1.Secret) ([]Credential, error) {
	if !IsWorkloadIdentity(secret) {
		return p.Manifest.Credentials, nil
	}
	if p.Manifest.WorkloadIdentity == nil {
		return nil, &ValidationError{Type: p.Manifest.Type, Errors: field.ErrorList{field.Invalid(
			field.NewPath("metadata", "labels").Key(purposeLabel), purposeWorkloadIdentityRequestor,
			fmt.Sprintf("the credentials secret %s/%s holds a workload identity's token, and provider %q declares no workloadIdentity credentials in provider.yaml",
				secret.Namespace, secret.Name, p.Manifest.Type))}}
	}
	return p.Manifest.WorkloadIdentity.Credentials, nil
}

// OperatorOnlyCredentials are the keys of secret that the provider marks operatorOnly
// and the secret sets.
func (p *Provider) OperatorOnlyCredentials(secret *corev1.Secret) []string {
	credentials, _ := p.credentialsFor(secret)
	var keys []string
	for _, c := range credentials {
		if c.OperatorOnly && secret != nil && len(secret.Data[c.Key]) > 0 {
			keys = append(keys, c.Key)
		}
	}
	return keys
}

// Credentials maps the credentials secret to the environment terraform runs with, but for
// the credentials that are files (CredentialFiles). The values must only ever reach a
// process environment, never a file, log or object.
func (p *Provider) Credentials(secret *corev1.Secret) (map[string]string, error) {
	if secret == nil {
		return nil, &ValidationError{Type: p.Manifest.Type, Errors: field.ErrorList{field.Required(field.NewPath("spec", "secretRef"), "the credentials secret is missing")}}
	}
	credentials, err := p.credentialsFor(secret)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	var errs field.ErrorList
	for _, c := range credentials {
		value, invalid := credentialValue(secret, c)
		switch {
		case invalid != nil:
			errs = append(errs, invalid)
		case c.File:
			// The executor writes the file and gives its path in the environment.
		case value != "":
			env[c.EnvName()] = value
		}
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Type: p.Manifest.Type, Errors: errs}
	}
	return env, nil
}

// CredentialFiles are the keys of secret that reach terraform as files, by the
// environment variable that gets the file's path: a workload identity's token, which the
// executor keeps as fresh as the Secret while a run goes on. Credentials checks that
// secret holds them.
func (p *Provider) CredentialFiles(secret *corev1.Secret) map[string]string {
	credentials, err := p.credentialsFor(secret)
	if err != nil {
		return nil
	}
	files := map[string]string{}
	for _, c := range credentials {
		if c.File && secret != nil && len(secret.Data[c.Key]) > 0 {
			files[c.EnvName()] = c.Key
		}
	}
	return files
}

// credentialValue is the value of c in secret, "" for an absent optional one, or the
// error naming the field that lacks it.
func credentialValue(secret *corev1.Secret, c Credential) (string, *field.Error) {
	path := field.NewPath("data").Key(c.Key)
	raw, ok := secret.Data[c.Key]
	if !ok || len(raw) == 0 {
		if c.Optional {
			return "", nil
		}
		return "", field.Required(path, fmt.Sprintf("the credentials secret %s/%s must hold this key", secret.Namespace, secret.Name))
	}
	if c.Field == "" {
		return string(raw), nil
	}
	// Gardener writes a WorkloadIdentity's config as JSON; YAML reads that too.
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil || doc == nil {
		// The value is not shown: it is the shoot owner's, and may hold anything.
		return "", field.Invalid(path, "(not shown)", fmt.Sprintf("the credentials secret %s/%s must hold a YAML or JSON object here, with the field %q", secret.Namespace, secret.Name, c.Field))
	}
	path = path.Child(c.Field)
	value, ok := doc[c.Field]
	if !ok || value == nil || value == "" {
		if c.Optional {
			return "", nil
		}
		return "", field.Required(path, fmt.Sprintf("the credentials secret %s/%s must hold this field in the object of key %q", secret.Namespace, secret.Name, c.Key))
	}
	s, ok := value.(string)
	if !ok {
		return "", field.Invalid(path, "(not shown)", "must be a string")
	}
	return s, nil
}
