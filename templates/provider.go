package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/templates/mutations"
	"github.com/terraseed/terraseed/terraform/imports"
)

// The fixed names inside a provider directory.
const (
	manifestFile = "provider.yaml"
	schemaFile   = "schema.json"
)

// Manifest is a provider's provider.yaml: everything about a provider that is not HCL.
type Manifest struct {
	// Type is the Infrastructure spec.type this provider serves.
	Type string `json:"type"`
	// Description says in one line what the provider creates.
	Description string `json:"description,omitempty"`
	// Credentials maps keys of the secret referenced by spec.secretRef to environment variables.
	Credentials []Credential `json:"credentials,omitempty"`
	// WorkloadIdentity are the credentials of a Secret gardenlet fills for a
	// WorkloadIdentity instead of static keys (IsWorkloadIdentity); none: the provider
	// refuses such a Secret.
	WorkloadIdentity *WorkloadIdentity `json:"workloadIdentity,omitempty"`
	// Networks names the CIDR fields of the input for the checks every provider needs.
	Networks NetworkChecks `json:"networks,omitempty"`
	// Resources lists the terraform resource and data source types the templates may declare.
	Resources []string `json:"resources,omitempty"`
	// ProtectedResources are resource types an apply must not destroy or replace, such as
	// a VPC: such a plan stops with an error until it is allowed once.
	ProtectedResources []string `json:"protectedResources,omitempty"`
	// ImportIDs declares, per resource type, the ID `terraform import` takes for a
	// resource: a template over its state attributes (`{{.id}}`), or "-" for a type that
	// cannot be imported. Every managed resource type needs one, so that a resource whose
	// state is lost is found again by its ID.
	ImportIDs map[string]string `json:"importIDs,omitempty"`
	// ImportIDForms read an import ID back, per resource type: a regular expression over
	// the whole ID with a named group per attribute its importIDs template names. An ID an
	// operator adopts is compared with the IDs every object holds in the canonical form
	// the template renders from the groups (imports.Forms).
	ImportIDForms map[string]string `json:"importIDForms,omitempty"`
	// OwnedNamespaces says that the provider's objects, of every kind, each create a
	// namespace in the cluster of their credentials that is theirs alone.
	OwnedNamespaces *OwnedNamespaces `json:"ownedNamespaces,omitempty"`
	// Status maps terraform outputs into the Infrastructure status.
	Status StatusMapping `json:"status"`
	// Account says that the provider's runs share a cloud account's API rate: the runs of
	// one set of credentials have one run budget, whatever project, kind or region they
	// serve (AccountKey); none: the runs have no budget but the seed's.
	Account *accountManifest `json:"account,omitempty"`
	// Throttling are regular expressions of the provider's error texts that say the cloud
	// throttled its calls, besides the ones every provider shares.
	Throttling []string `json:"throttling,omitempty"`
	// Parallelism is terraform's -parallelism for the provider's runs; none: the
	// controller's (--parallelism), or terraform's default.
	Parallelism *int `json:"parallelism,omitempty"`
	// Kinds declares the kinds besides the Infrastructure the provider serves, each from
	// its directory <kind>/ beside provider.yaml (see Kind).
	Kinds map[Kind]KindManifest `json:"kinds,omitempty"`
}

// accountManifest gives the provider's runs budgets (`account: {}`): the budget key is a keyed
// digest of the whole credentials, every key the provider declares (see AccountKey).
type accountManifest struct {
	// Credentials named the keys that identified the account; a provider.yaml written
	// before budgets were keyed by the whole credentials may still name them, each a
	// declared key, but they key nothing: one key alone (an access key ID, which others
	// may know) would let a tenant name another's budget.
	Credentials []string `json:"credentials,omitempty"`
}

// WorkloadIdentity declares the credentials of a workload identity's Secret: its token
// (key token) as a file, values of its config (key config), such as a role to assume.
type WorkloadIdentity struct {
	Credentials []Credential `json:"credentials"`
}

// maxParallelism bounds provider.yaml's parallelism: more concurrent calls per run only
// spend an account's API budget faster.
const maxParallelism = 100

// Credential maps one key of the credentials secret to the environment of terraform.
type Credential struct {
	// Key is the key in the secret's data.
	Key string `json:"key"`
	// Env is an environment variable the provider plugin reads itself (AWS_ACCESS_KEY_ID).
	Env string `json:"env,omitempty"`
	// Variable is a sensitive terraform variable that receives the value via TF_VAR_<name>;
	// the engine declares it in variables.tf.
	Variable string `json:"variable,omitempty"`
	// Optional keys may be absent; an absent optional variable is the empty string.
	Optional bool `json:"optional,omitempty"`
	// Sensitive marks the variable sensitive (the default); an endpoint URL is not a secret,
	// and terraform refuses sensitive values in for_each.
	Sensitive *bool `json:"sensitive,omitempty"`
	// OperatorOnly keys, such as an endpoint that sends every cloud call (and so the outputs
	// that flow into Gardener and the control plane) to the URL it names, are refused in a
	// secret unless the operator allows them.
	OperatorOnly bool `json:"operatorOnly,omitempty"`
	// File makes the value a file whose path, not the value, Env or Variable gets: a
	// workload identity's token, which gardenlet renews in the Secret while a run may
	// still need it, and which the executors keep as fresh as the Secret.
	File bool `json:"file,omitempty"`
	// Field is the name of a field of the key's value, a YAML or JSON object (a workload
	// identity's config), whose string the credential is, such as aws's roleARN.
	Field string `json:"field,omitempty"`
	// Aliases are other keys that may hold the value, tried in order when Key is absent:
	// Gardener fills some secrets under another naming (a DNS provider's
	// AWS_ACCESS_KEY_ID for accessKeyID).
	Aliases []string `json:"aliases,omitempty"`
}

// EnvName is the environment variable that carries the credential.
func (c Credential) EnvName() string {
	if c.Variable != "" {
		return "TF_VAR_" + c.Variable
	}
	return c.Env
}

// NetworkChecks names input fields by path ("providerConfig.networks.zones[*].workers";
// roots are providerConfig, shoot, seed and cloudProfile). Absent fields are skipped.
type NetworkChecks struct {
	// CIDRs must parse and be canonical (no host bits set).
	CIDRs []string `json:"cidrs,omitempty"`
	// Container is the network (a VPC CIDR) every subnet must lie inside.
	Container string `json:"container,omitempty"`
	// Subnets must lie inside Container and must not overlap each other.
	Subnets []string `json:"subnets,omitempty"`
	// Nodes are candidates for the nodes CIDR; the first present one must cover Workers.
	Nodes []string `json:"nodes,omitempty"`
	// Workers are the subnets the nodes run in.
	Workers []string `json:"workers,omitempty"`
}

// StatusMapping declares how terraform outputs become status fields.
type StatusMapping struct {
	ProviderStatus ProviderStatusMapping `json:"providerStatus"`
	// NodesCIDR is the output holding the nodes CIDR, if the provider reports one.
	NodesCIDR string `json:"nodesCIDR,omitempty"`
	// EgressCIDRs is the output holding a list of egress CIDRs, if the provider reports them.
	EgressCIDRs string `json:"egressCIDRs,omitempty"`
}

// ProviderStatusMapping builds providerStatus: apiVersion and kind, then each field
// (a dotted path such as "vpc.id") set from the named terraform output.
type ProviderStatusMapping struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Fields     map[string]string `json:"fields"`
}

// Outputs lists every terraform output the mapping reads, sorted.
func (s StatusMapping) Outputs() []string {
	var names []string
	for _, output := range s.ProviderStatus.Fields {
		names = append(names, output)
	}
	for _, output := range []string{s.NodesCIDR, s.EgressCIDRs} {
		if output != "" {
			names = append(names, output)
		}
	}
	sort.Strings(names)
	return compactSorted(names)
}

// Provider is one loaded provider directory.
type Provider struct {
	Manifest Manifest
	// Source says where the provider came from (embedded, or a directory) for messages.
	Source string
	// ControlPlane is the provider's control-plane part; nil when it has none.
	ControlPlane *ControlPlane
	schema       *jsonschema.Schema
	templates    map[string]string // output file name -> template text
	mutations    *mutations.Set
	throttling   []*regexp.Regexp
	importIDs    *imports.IDs
	idForms      *imports.Forms
	kinds        map[Kind]*KindProvider
	// helpers are the named templates of the provider's _*.tpl files.
	helpers string
}

// Mutations returns the provider's control-plane mutations; nil when it declares none.
func (p *Provider) Mutations() *mutations.Set { return p.mutations }

// ProviderError says a provider directory is broken; it is the provider author's mistake,
// not the user's.
type ProviderError struct {
	Source string
	Err    error
}

func (e *ProviderError) Error() string { return fmt.Sprintf("provider %s: %v", e.Source, e.Err) }
func (e *ProviderError) Unwrap() error { return e.Err }

var (
	variableName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	secretKey    = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	envName      = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
)

// LoadProvider reads one provider directory from fsys and checks it is complete.
func LoadProvider(fsys fs.FS, dir, source string) (*Provider, error) {
	p, err := loadProvider(fsys, dir, source)
	if err != nil {
		return nil, &ProviderError{Source: source, Err: err}
	}
	return p, nil
}

func loadProvider(fsys fs.FS, dir, source string) (*Provider, error) {
	raw, err := fs.ReadFile(fsys, path.Join(dir, manifestFile))
	if err != nil {
		return nil, err
	}
	p := &Provider{Source: source}
	if err := yaml.UnmarshalStrict(raw, &p.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestFile, err)
	}
	if err := p.Manifest.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestFile, err)
	}
	if err := p.Manifest.checkAccount(); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestFile, err)
	}
	if p.throttling, err = p.Manifest.checkThrottling(); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestFile, err)
	}
	if err := p.Manifest.checkParallelism(); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestFile, err)
	}

	if p.schema, err = compileSchema(fsys, path.Join(dir, schemaFile), schemaFile); err != nil {
		return nil, err
	}
	if p.ControlPlane, err = loadControlPlane(fsys, dir); err != nil {
		return nil, err
	}
	if p.helpers, err = loadHelpers(fsys, dir, ""); err != nil {
		return nil, err
	}
	if p.templates, err = loadTerraformTemplates(fsys, dir); err != nil {
		return nil, err
	}
	if p.mutations, err = mutations.Load(fsys, dir, p.Manifest.Type); err != nil {
		return nil, err
	}
	if p.importIDs, err = checkImportIDs(p.Manifest, p.templates); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestFile, err)
	}
	if p.idForms, err = imports.ParseForms(p.Manifest.ImportIDForms, p.importIDs); err != nil {
		return nil, fmt.Errorf("%s: %w", manifestFile, err)
	}
	if p.kinds, err = loadKinds(fsys, dir, p, p.Manifest.Kinds); err != nil {
		return nil, err
	}
	return p, nil
}

// compileSchema reads and compiles a JSON Schema; name is how messages call the file.
func compileSchema(fsys fs.FS, file, name string) (*jsonschema.Schema, error) {
	raw, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	compiler := jsonschema.NewCompiler()
	compiler.AssertFormat()
	if err := compiler.AddResource(name, doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	schema, err := compiler.Compile(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return schema, nil
}

func (m *Manifest) check() error {
	if m.Type == "" {
		return fmt.Errorf("type is required")
	}
	if err := checkCredentials("credentials", m.Credentials); err != nil {
		return err
	}
	if m.WorkloadIdentity != nil {
		if len(m.WorkloadIdentity.Credentials) == 0 {
			return fmt.Errorf("workloadIdentity.credentials: declare at least the token")
		}
		if err := checkCredentials("workloadIdentity.credentials", m.WorkloadIdentity.Credentials); err != nil {
			return err
		}
	}
	for _, p := range m.Networks.all() {
		if _, err := parseFieldPath(p); err != nil {
			return fmt.Errorf("networks: %w", err)
		}
	}
	if err := m.Status.ProviderStatus.check(); err != nil {
		return err
	}
	return checkProtected(m.Resources, m.ProtectedResources)
}

// check checks a providerStatus mapping; errors start with status.providerStatus.
func (ps ProviderStatusMapping) check() error {
	if ps.APIVersion == "" || ps.Kind == "" {
		return fmt.Errorf("status.providerStatus needs apiVersion and kind")
	}
	for field := range ps.Fields {
		if field == "apiVersion" || field == "kind" || strings.HasPrefix(field, ".") || strings.HasSuffix(field, ".") || strings.Contains(field, "..") {
			return fmt.Errorf("status.providerStatus.fields: %q is not a field path", field)
		}
	}
	return nil
}

// checkProtected checks that each protected type is a managed type of resources.
func checkProtected(resources, protected []string) error {
	for i, t := range protected {
		if !slices.Contains(resources, t) || strings.HasPrefix(t, "data.") {
			return fmt.Errorf("protectedResources[%d]: %q is not a resource type declared in resources", i, t)
		}
	}
	return nil
}

// checkCredentials checks one set of credentials, named by path in messages.
func checkCredentials(path string, credentials []Credential) error {
	whole := map[string]bool{}
	seen := map[string]bool{}
	for i, c := range credentials {
		switch {
		case c.Key == "":
			return fmt.Errorf("%s[%d].key is required", path, i)
		case (c.Env == "") == (c.Variable == ""):
			return fmt.Errorf("%s[%d]: set exactly one of env and variable", path, i)
		case c.Variable != "" && !variableName.MatchString(c.Variable):
			return fmt.Errorf("%s[%d].variable %q is not a terraform identifier", path, i, c.Variable)
		case c.Env != "" && !envName.MatchString(c.Env):
			return fmt.Errorf("%s[%d].env %q is not an environment variable name", path, i, c.Env)
		case c.File && c.Field != "":
			return fmt.Errorf("%s[%d]: a file holds the whole key %q: set file or field, not both", path, i, c.Key)
		case c.Field != "" && !variableName.MatchString(c.Field):
			return fmt.Errorf("%s[%d].field %q is not a field name", path, i, c.Field)
		case slices.ContainsFunc(c.Aliases, func(a string) bool { return !secretKey.MatchString(a) || a == c.Key }):
			return fmt.Errorf("%s[%d].aliases: each must be a Secret key other than key %q", path, i, c.Key)
		case seen[c.Key+"."+c.Field]:
			return fmt.Errorf("%s[%d]: key %q (field %q) is declared twice", path, i, c.Key, c.Field)
		case c.Field == "" && seen[c.Key+".*"] || c.Field != "" && whole[c.Key]:
			// Templates read a key whole as .credentials.<key>, a field as
			// .credentials.<key>.<field>: one key cannot be both.
			return fmt.Errorf("%s[%d]: key %q is declared whole and by field: declare its fields only", path, i, c.Key)
		}
		seen[c.Key+"."+c.Field] = true
		if c.Field == "" {
			whole[c.Key] = true
		} else {
			seen[c.Key+".*"] = true
		}
	}
	return nil
}

// name is how account.credentials names the credential: its key, or key.field.
func (c Credential) name() string {
	if c.Field == "" {
		return c.Key
	}
	return c.Key + "." + c.Field
}

func (n NetworkChecks) all() []string {
	all := append([]string{}, n.CIDRs...)
	if n.Container != "" {
		all = append(all, n.Container)
	}
	all = append(all, n.Subnets...)
	all = append(all, n.Nodes...)
	return append(all, n.Workers...)
}

func compactSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// mustJSON is for values this package built itself.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
