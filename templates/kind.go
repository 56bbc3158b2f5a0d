package templates

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/terraseed/terraseed/terraform/imports"
)

// Kind names an infrastructure-like extension kind besides the Infrastructure that a
// provider serves from a directory of its own, templates/<type>/<kind>/.
type Kind string

// The kinds a provider may ship a directory for; the directory's name is the kind.
const (
	KindBackupBucket Kind = "backupbucket"
	KindBackupEntry  Kind = "backupentry"
	KindDNSRecord    Kind = "dnsrecord"
	KindBastion      Kind = "bastion"
	// kindSelfHostedShootExposure is the load balancer in front of a self-hosted shoot's
	// control-plane nodes; other packages name it Kind("selfhostedshootexposure"), as
	// the package's count of exported names is bounded (test/layout).
	kindSelfHostedShootExposure Kind = "selfhostedshootexposure"
)

// Kinds lists every kind a provider may serve from templates.
var Kinds = []Kind{KindBackupBucket, KindBackupEntry, KindDNSRecord, KindBastion, kindSelfHostedShootExposure}

// kindStatusFields are the fields of each kind's own status that outputs may set, with
// the status field path as Gardener names it.
var kindStatusFields = map[Kind][]string{
	KindDNSRecord: {"zone"},
	KindBastion:   {"ingress.ip", "ingress.hostname"},
	// The exposure's status.ingress is a list; its outputs give its one element.
	kindSelfHostedShootExposure: {"ingress.ip", "ingress.hostname"},
}

// KindManifest is provider.yaml's kinds.<kind>: everything about a kind's directory that
// is not HCL. Credentials, throttling, parallelism and the account are the provider's.
type KindManifest struct {
	// Types are the spec.type values this kind serves (Gardener names a DNS provider
	// "aws-route53", not "aws"); none: the provider's type.
	Types []string `json:"types,omitempty"`
	// Credentials replace the provider's for this kind, whose secret Gardener fills
	// differently (a DNS provider's secret); none: the provider's.
	Credentials []Credential `json:"credentials,omitempty"`
	// Resources, ProtectedResources and ImportIDs are the provider's fields of the same
	// names, for the kind's templates.
	Resources          []string          `json:"resources,omitempty"`
	ProtectedResources []string          `json:"protectedResources,omitempty"`
	ImportIDs          map[string]string `json:"importIDs,omitempty"`
	ImportIDForms      map[string]string `json:"importIDForms,omitempty"`
	// Status maps terraform outputs into the kind's status.
	Status KindStatusMapping `json:"status,omitempty"`
	// EtcdBackupSecret (backupentry only) are the keys the Secret etcd-backup in the
	// shoot's namespace holds besides the entry's credentials and bucketName, each from the
	// named output: what the provider's etcd backups need beyond the credentials (aws: the
	// region). Sensitive outputs may be named; they never reach the status.
	EtcdBackupSecret map[string]string `json:"etcdBackupSecret,omitempty"`
	// Purge (backupentry only) is what the deletion removes before its destroy that
	// terraform has no resource for; none: the destroy alone.
	Purge *purgeManifest `json:"purge,omitempty"`
}

// Outputs lists every terraform output the kind reads: its status's, and those of the
// Secrets it writes, sorted.
func (m KindManifest) Outputs() []string {
	names := append(m.Status.Outputs(), slices.Collect(maps.Values(m.EtcdBackupSecret))...)
	slices.Sort(names)
	return slices.Compact(names)
}

// KindStatusMapping declares how terraform outputs become a kind's status.
type KindStatusMapping struct {
	// ProviderStatus builds status.providerStatus as the provider's own mapping does;
	// none: the kind reports no providerStatus.
	ProviderStatus *ProviderStatusMapping `json:"providerStatus,omitempty"`
	// Fields sets fields of the kind's status (dnsrecord: zone; bastion and
	// selfhostedshootexposure: ingress.ip, ingress.hostname), each from the named output, a
	// string.
	Fields map[string]string `json:"fields,omitempty"`
	// GeneratedSecret (backupbucket only) are the keys of the Secret that
	// status.generatedSecretRef names, each from the named output: what the backup side
	// needs to reach the bucket. gardenlet hands that Secret to each of the bucket's
	// BackupEntries as its credentials, so it must hold every key their credentials
	// require. Sensitive outputs may be named; they never reach the status.
	GeneratedSecret map[string]string `json:"generatedSecret,omitempty"`
}

// StatusOutputs lists the terraform outputs that reach the status, which may not be
// sensitive, sorted.
func (s KindStatusMapping) StatusOutputs() []string {
	var names []string
	if s.ProviderStatus != nil {
		names = slices.Collect(maps.Values(s.ProviderStatus.Fields))
	}
	names = append(names, slices.Collect(maps.Values(s.Fields))...)
	slices.Sort(names)
	return slices.Compact(names)
}

// Outputs lists every terraform output the mapping reads, sorted.
func (s KindStatusMapping) Outputs() []string {
	var names []string
	if s.ProviderStatus != nil {
		names = slices.Collect(maps.Values(s.ProviderStatus.Fields))
	}
	names = append(names, slices.Collect(maps.Values(s.Fields))...)
	names = append(names, slices.Collect(maps.Values(s.GeneratedSecret))...)
	slices.Sort(names)
	return slices.Compact(names)
}

// KindProvider is one kind's directory of a provider, loaded and checked.
type KindProvider struct {
	Kind Kind
	// Type is the provider's type, which names it in messages.
	Type     string
	Manifest KindManifest
	// schema is the kind's schema.json; nil: the kind reads no providerConfig.
	schema    *jsonschema.Schema
	templates map[string]string
	importIDs *imports.IDs
	idForms   *imports.Forms
	provider  *Provider
	// helpers are the provider's named templates and the kind directory's own.
	helpers string
}

// NoKindError says a provider serves no such kind: it ships no directory for it.
type NoKindError struct {
	Type string
	Kind Kind
}

func (e *NoKindError) Error() string {
	return fmt.Sprintf("provider %q serves no %s: it has no %s/ directory", e.Type, e.Kind, e.Kind)
}

// Kind returns the provider's directory for kind.
func (p *Provider) Kind(kind Kind) (*KindProvider, error) {
	if k, ok := p.kinds[kind]; ok {
		return k, nil
	}
	return nil, &NoKindError{Type: p.Manifest.Type, Kind: kind}
}

// Kinds lists the kinds the provider serves, in the order of Kinds.
func (p *Provider) Kinds() []Kind {
	var kinds []Kind
	for _, k := range Kinds {
		if _, ok := p.kinds[k]; ok {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// Templates lists the terraform files the kind renders (without variables.tf).
func (k *KindProvider) Templates() []string {
	return slices.Sorted(maps.Keys(k.templates))
}

// Types are the spec.type values the kind serves.
func (k *KindProvider) Types() []string {
	if len(k.Manifest.Types) > 0 {
		return k.Manifest.Types
	}
	return []string{k.Type}
}

// ImportIDForms read the kind's import IDs back into their canonical form.
func (k *KindProvider) ImportIDForms() *imports.Forms { return k.idForms }

// ImportIDs are the kind's import ID templates.
func (k *KindProvider) ImportIDs() *imports.IDs { return k.importIDs }

// ImportIDsFile is Provider.ImportIDsFile for the kind's import IDs.
func (k *KindProvider) ImportIDsFile() string { return importIDsFile(k.importIDs) }

// Provider is the provider the kind's directory belongs to: its account, throttling and
// parallelism are the kind's too.
func (k *KindProvider) Provider() *Provider { return k.provider }

// loadKinds loads every kind directory of the provider in dir, with what provider.yaml
// declares of it, and checks that each kind provider.yaml declares has its directory.
func loadKinds(fsys fs.FS, dir string, p *Provider, declared map[Kind]KindManifest) (map[Kind]*KindProvider, error) {
	for kind := range declared {
		if !slices.Contains(Kinds, kind) {
			return nil, fmt.Errorf("%s: kinds.%s: no such kind (one of %s)", manifestFile, kind, kindList())
		}
	}
	kinds := map[Kind]*KindProvider{}
	for _, kind := range Kinds {
		kindDir := path.Join(dir, string(kind))
		info, err := fs.Stat(fsys, kindDir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, ok := declared[kind]; ok {
				return nil, fmt.Errorf("%s: kinds.%s: the provider has no %s/ directory with its templates", manifestFile, kind, kind)
			}
			continue
		case err != nil:
			return nil, err
		case !info.IsDir():
			return nil, fmt.Errorf("%s: must be a directory of the kind's templates", kind)
		}
		// The directory serves the kind; kinds.<kind> adds what it declares.
		k, err := loadKind(fsys, kindDir, kind, p, declared[kind])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		kinds[kind] = k
	}
	if err := checkGeneratedSecret(kinds, p); err != nil {
		return nil, err
	}
	return kinds, nil
}

func loadKind(fsys fs.FS, dir string, kind Kind, p *Provider, m KindManifest) (*KindProvider, error) {
	k := &KindProvider{Kind: kind, Type: p.Manifest.Type, Manifest: m, provider: p}
	if err := m.check(kind); err != nil {
		return nil, fmt.Errorf("%s: kinds.%s.%w", manifestFile, kind, err)
	}
	if err := checkPurge(kind, m.Purge, k.credentialSet()); err != nil {
		return nil, fmt.Errorf("%s: kinds.%s.%w", manifestFile, kind, err)
	}
	if _, err := fs.Stat(fsys, path.Join(dir, schemaFile)); err == nil {
		if k.schema, err = compileSchema(fsys, path.Join(dir, schemaFile), path.Join(string(kind), schemaFile)); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var err error
	if k.helpers, err = loadHelpers(fsys, dir, p.helpers); err != nil {
		return nil, err
	}
	if k.templates, err = loadTerraformTemplates(fsys, dir); err != nil {
		return nil, err
	}
	if k.importIDs, err = checkImportIDs(Manifest{Resources: m.Resources, ImportIDs: m.ImportIDs}, k.templates); err != nil {
		return nil, fmt.Errorf("%s: kinds.%s.%w", manifestFile, kind, err)
	}
	if k.idForms, err = imports.ParseForms(m.ImportIDForms, k.importIDs); err != nil {
		return nil, fmt.Errorf("%s: kinds.%s.%w", manifestFile, kind, err)
	}
	return k, nil
}

// check checks a kind's manifest; errors start with the field's path below kinds.<kind>.
func (m *KindManifest) check(kind Kind) error {
	for i, t := range m.Types {
		if t == "" || slices.Contains(m.Types[:i], t) {
			return fmt.Errorf("types[%d]: %q is empty or given twice", i, t)
		}
	}
	if len(m.Credentials) > 0 {
		if err := checkCredentials("credentials", m.Credentials); err != nil {
			return err
		}
	}
	if err := checkProtected(m.Resources, m.ProtectedResources); err != nil {
		return err
	}
	if ps := m.Status.ProviderStatus; ps != nil {
		if err := ps.check(); err != nil {
			return err
		}
	}
	for _, field := range slices.Sorted(maps.Keys(m.Status.Fields)) {
		if !slices.Contains(kindStatusFields[kind], field) {
			allowed := "none"
			if len(kindStatusFields[kind]) > 0 {
				allowed = strings.Join(kindStatusFields[kind], ", ")
			}
			return fmt.Errorf("status.fields: %q is not a status field outputs may set for a %s (they are: %s)", field, kind, allowed)
		}
	}
	if len(m.Status.GeneratedSecret) > 0 && kind != KindBackupBucket {
		return fmt.Errorf("status.generatedSecret: only a backupbucket has a generated Secret")
	}
	for key := range m.Status.GeneratedSecret {
		if !secretKey.MatchString(key) {
			return fmt.Errorf("status.generatedSecret: %q is not a Secret key", key)
		}
	}
	return m.checkEtcdBackupSecret(kind)
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
