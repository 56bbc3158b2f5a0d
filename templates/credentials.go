package templates

import (
	"fmt"
	"strings"

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

// credentialSet is what a provider, or one of its kinds, declares for its secrets.
type credentialSet struct {
	providerType     string
	static           []Credential
	workloadIdentity *WorkloadIdentity
}

func (p *Provider) credentialSet() credentialSet {
	return credentialSet{providerType: p.Manifest.Type, static: p.Manifest.Credentials, workloadIdentity: p.Manifest.WorkloadIdentity}
}

// OperatorOnlyCredentials are the keys of secret that the provider marks operatorOnly
// and the secret sets.
func (p *Provider) OperatorOnlyCredentials(secret *corev1.Secret) []string {
	return p.credentialSet().operatorOnly(secret)
}

// Credentials maps the credentials secret to the environment terraform runs with, but for
// the credentials that are files (CredentialFiles). The values must only ever reach a
// process environment, never a file, log or object.
func (p *Provider) Credentials(secret *corev1.Secret) (map[string]string, error) {
	return p.credentialSet().environment(secret)
}

// CredentialFiles are the keys of secret that reach terraform as files, by the
// environment variable that gets the file's path: a workload identity's token, which the
// executor keeps as fresh as the Secret while a run goes on. Credentials checks that
// secret holds them.
func (p *Provider) CredentialFiles(secret *corev1.Secret) map[string]string {
	return p.credentialSet().files(secret)
}

// declared are the credentials declared for a secret of static keys, or for a workload
// identity's; a provider without the latter refuses it, naming spec.secretRef.
func (s credentialSet) declared(workloadIdentity bool) ([]Credential, error) {
	if !workloadIdentity {
		return s.static, nil
	}
	if s.workloadIdentity == nil {
		return nil, &ValidationError{Type: s.providerType, Errors: field.ErrorList{field.Invalid(field.NewPath("spec", "secretRef"), "",
			fmt.Sprintf("the credentials secret holds a workload identity's token, and provider %q declares no workloadIdentity credentials in provider.yaml", s.providerType))}}
	}
	return s.workloadIdentity.Credentials, nil
}

// forSecret are the credentials declared for secret's kind: static keys, or a workload
// identity's.
func (s credentialSet) forSecret(secret *corev1.Secret) ([]Credential, error) {
	if !IsWorkloadIdentity(secret) {
		return s.static, nil
	}
	if s.workloadIdentity == nil {
		return nil, &ValidationError{Type: s.providerType, Errors: field.ErrorList{field.Invalid(
			field.NewPath("metadata", "labels").Key(purposeLabel), purposeWorkloadIdentityRequestor,
			fmt.Sprintf("the credentials secret %s/%s holds a workload identity's token, and provider %q declares no workloadIdentity credentials in provider.yaml",
				secret.Namespace, secret.Name, s.providerType))}}
	}
	return s.workloadIdentity.Credentials, nil
}

func (s credentialSet) operatorOnly(secret *corev1.Secret) []string {
	credentials, _ := s.forSecret(secret)
	var keys []string
	for _, c := range credentials {
		if key, _ := lookupKey(secret, c); c.OperatorOnly && key != "" {
			keys = append(keys, key)
		}
	}
	return keys
}

func (s credentialSet) environment(secret *corev1.Secret) (map[string]string, error) {
	if secret == nil {
		return nil, &ValidationError{Type: s.providerType, Errors: field.ErrorList{field.Required(field.NewPath("spec", "secretRef"), "the credentials secret is missing")}}
	}
	credentials, err := s.forSecret(secret)
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
		return nil, &ValidationError{Type: s.providerType, Errors: errs}
	}
	return env, nil
}

func (s credentialSet) files(secret *corev1.Secret) map[string]string {
	credentials, err := s.forSecret(secret)
	if err != nil {
		return nil
	}
	files := map[string]string{}
	for _, c := range credentials {
		if key, _ := lookupKey(secret, c); c.File && key != "" {
			files[c.EnvName()] = key
		}
	}
	return files
}

// lookupKey finds the key of secret that holds c, its own or an alias, and its value;
// "" when none holds a value.
func lookupKey(secret *corev1.Secret, c Credential) (string, []byte) {
	if secret == nil {
		return "", nil
	}
	for _, key := range append([]string{c.Key}, c.Aliases...) {
		if raw := secret.Data[key]; len(raw) > 0 {
			return key, raw
		}
	}
	return "", nil
}

// credentialValue is the value of c in secret, "" for an absent optional one, or the
// error naming the field that lacks it.
func credentialValue(secret *corev1.Secret, c Credential) (string, *field.Error) {
	key, raw := lookupKey(secret, c)
	if key == "" {
		if c.Optional {
			return "", nil
		}
		holds := "this key"
		if len(c.Aliases) > 0 {
			holds = fmt.Sprintf("this key or one of %s", strings.Join(c.Aliases, ", "))
		}
		return "", field.Required(field.NewPath("data").Key(c.Key), fmt.Sprintf("the credentials secret %s/%s must hold %s", secret.Namespace, secret.Name, holds))
	}
	path := field.NewPath("data").Key(key)
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
		return "", field.Required(path, fmt.Sprintf("the credentials secret %s/%s must hold this field in the object of key %q", secret.Namespace, secret.Name, key))
	}
	s, ok := value.(string)
	if !ok {
		return "", field.Invalid(path, "(not shown)", "must be a string")
	}
	return s, nil
}
