package templates

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	"github.com/terraseed/terraseed/terraform/purge"
)

// purgeManifest is kinds.backupentry.purge: what a deletion removes, before its destroy,
// that terraform has no resource for (an S3 bucket's objects under the entry's prefix).
// Bucket, Prefix, Region and Skip are templates of what the kind's templates see
// (.object, .credentials, ...), rendered with them into the configuration (purge.Key),
// which the destroy's run reads.
type purgeManifest struct {
	// Kind is what is purged: s3.
	Kind   string `json:"kind"`
	Bucket string `json:"bucket"`
	// Prefix must render to a prefix ending in "/".
	Prefix string `json:"prefix"`
	Region string `json:"region"`
	// Skip renders "true" for an object whose deletion purges nothing: a control plane
	// migration's source entry, which reads backups it does not own.
	Skip string `json:"skip,omitempty"`
	// Credentials name the credentials (key, or key.field) the purge uses, each from where
	// the run has it.
	Credentials purgeCredentials `json:"credentials"`
}

// purgeCredentials name, for each credential of a purge, the provider's credential that
// holds it: its key in the secret, or key.field for a field of a key.
type purgeCredentials struct {
	AccessKeyID      string `json:"accessKeyID,omitempty"`
	SecretAccessKey  string `json:"secretAccessKey,omitempty"`
	Endpoint         string `json:"endpoint,omitempty"`
	WebIdentityToken string `json:"webIdentityToken,omitempty"`
	RoleARN          string `json:"roleARN,omitempty"`
}

// purgeTemplate is one template field of a purge.
type purgeTemplate struct{ field, text string }

// templates are the purge's template fields, in their order in the manifest.
func (m *purgeManifest) templates() []purgeTemplate {
	return []purgeTemplate{{"bucket", m.Bucket}, {"prefix", m.Prefix}, {"region", m.Region}, {"skip", m.Skip}}
}

// named are the credentials the purge names, by the field naming each.
func (c purgeCredentials) named() map[string]string {
	named := map[string]string{}
	for field, name := range map[string]string{"accessKeyID": c.AccessKeyID, "secretAccessKey": c.SecretAccessKey, "endpoint": c.Endpoint, "webIdentityToken": c.WebIdentityToken, "roleARN": c.RoleARN} {
		if name != "" {
			named[field] = name
		}
	}
	return named
}

// checkPurge checks kinds.<kind>.purge of a kind whose credentials are set; errors start
// with the field's path below kinds.<kind>.
func checkPurge(kind Kind, m *purgeManifest, credentials credentialSet) error {
	if m == nil {
		return nil
	}
	if kind != KindBackupEntry {
		return fmt.Errorf("purge: only a backupentry purges")
	}
	if m.Kind != purge.KindS3 {
		return fmt.Errorf("purge.kind: %q is not a kind of purge (one of: %s)", m.Kind, purge.KindS3)
	}
	for _, f := range m.templates() {
		if f.text == "" && f.field != "skip" {
			return fmt.Errorf("purge.%s: must not be empty", f.field)
		}
		if _, err := template.New(f.field).Funcs(manifestFuncMap(nil)).Parse(f.text); err != nil {
			return fmt.Errorf("purge.%s: %w", f.field, err)
		}
	}
	declared := append(append([]Credential{}, credentials.static...), credentials.workloadIdentityCredentials()...)
	named := m.Credentials.named()
	for _, field := range slices.Sorted(maps.Keys(named)) {
		if findCredential(declared, named[field]) == nil {
			return fmt.Errorf("purge.credentials.%s: %q names no credential of the kind (key, or key.field)", field, named[field])
		}
	}
	c := m.Credentials
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") || (c.WebIdentityToken == "") != (c.RoleARN == "") || (c.AccessKeyID == "" && c.WebIdentityToken == "") {
		return fmt.Errorf("purge.credentials: name accessKeyID and secretAccessKey, or webIdentityToken and roleARN, or all four")
	}
	return nil
}

func (s credentialSet) workloadIdentityCredentials() []Credential {
	if s.workloadIdentity == nil {
		return nil
	}
	return s.workloadIdentity.Credentials
}

// findCredential is the credential of credentials that name (key, or key.field) names.
func findCredential(credentials []Credential, name string) *Credential {
	key, field, _ := strings.Cut(name, ".")
	for i, c := range credentials {
		if c.Key == key && c.Field == field {
			return &credentials[i]
		}
	}
	return nil
}

// renderPurge renders the kind's purge for the object of data into the configuration
// file the destroy's run reads, with the environment variables the run has credentials
// in; "" when the kind purges nothing for it.
func (k *KindProvider) renderPurge(data map[string]any, credentials []Credential) (string, error) {
	m := k.Manifest.Purge
	if m == nil {
		return "", nil
	}
	field := func(name string) string { return fmt.Sprintf("%s: kinds.%s.purge.%s", manifestFile, k.Kind, name) }
	values := map[string]string{}
	for _, f := range m.templates() {
		value, err := executeText(f.field, f.text, k.helpers, manifestFuncMap(nil), data)
		if err != nil {
			return "", templateError(k.Type, string(k.Kind), field(f.field), data, err)
		}
		values[f.field] = strings.TrimSpace(value)
	}
	if values["skip"] == "true" {
		return "", nil
	}
	env := func(name string) string {
		if c := findCredential(credentials, name); name != "" && c != nil {
			return c.EnvName()
		}
		return ""
	}
	spec := purge.Spec{Kind: m.Kind, Bucket: values["bucket"], Prefix: values["prefix"], Region: values["region"], Env: purge.Env{
		AccessKeyID: env(m.Credentials.AccessKeyID), SecretAccessKey: env(m.Credentials.SecretAccessKey), Endpoint: env(m.Credentials.Endpoint),
		WebIdentityTokenFile: env(m.Credentials.WebIdentityToken), RoleARN: env(m.Credentials.RoleARN),
	}}
	if err := spec.Check(); err != nil {
		return "", &RenderError{Type: k.Type, File: field("*"), Err: err}
	}
	out, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", err
	}
	return string(out) + "\n", nil
}
