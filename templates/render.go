package templates

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"text/template"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates/engine"
)

// The fixed names of a provider's terraform part: templates in the provider's directory,
// and the variables file the engine writes.
const (
	templateExt   = ".tf.tpl"
	variablesFile = "variables.tf"
)

// Input is what a provider renders from.
type Input struct {
	Infrastructure *extensionsv1alpha1.Infrastructure
	// Cluster may be nil; templates then see empty shoot, seed and cloudProfile objects.
	// A Cluster without a seed (a self-hosted shoot's) gives them no .cluster.seed.
	Cluster *extensionsv1alpha1.Cluster
	// WorkloadIdentity renders for the provider's workloadIdentity credentials, for a
	// Secret of a workload identity (IsWorkloadIdentity), instead of its static ones.
	WorkloadIdentity bool
}

// Rendered is a terraform configuration ready to run.
type Rendered struct {
	// Files are terraform files by name (main.tf, variables.tf, ...), all for one directory.
	Files map[string]string
	// TFVarsJSON is the content of terraform.tfvars.json: every user-supplied value.
	TFVarsJSON []byte
	// Purge is the purge a destroy of the object runs first, JSON of a purge.Spec, which
	// the configuration carries under purge.Key; empty: none (see purgeManifest).
	Purge string
}

// RenderError says a provider's templates failed on an input that passed validation: the
// provider author's mistake or a gap in the provider's schema.
type RenderError struct {
	Type string
	File string
	Err  error
}

func (e *RenderError) Error() string {
	return fmt.Sprintf("rendering %s for provider %q: %v", e.File, e.Type, e.Err)
}
func (e *RenderError) Unwrap() error { return e.Err }

// helpersName names the provider's helper templates; their files start with "_" and end
// in ".tpl", as Helm's _helpers.tpl: they define named templates and render no file.
const helpersName = "_helpers"

// loadHelpers reads the helper templates in dir, appended to those of the directories
// above it (inherited), and checks that they parse.
func loadHelpers(fsys fs.FS, dir, inherited string) (string, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "_*.tpl"))
	if err != nil {
		return "", err
	}
	helpers := inherited
	for _, name := range names {
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return "", err
		}
		if _, err := template.New(path.Base(name)).Funcs(funcMap(nil)).Parse(string(text)); err != nil {
			return "", err
		}
		helpers += string(text) + "\n"
	}
	return helpers, nil
}

// loadTerraformTemplates reads the provider's terraform templates in dir, by the name of
// the file each renders.
func loadTerraformTemplates(fsys fs.FS, dir string) (map[string]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	templates := map[string]string{}
	for _, entry := range entries {
		name := entry.Name()
		if entry.IsDir() || !strings.HasSuffix(name, templateExt) {
			continue
		}
		file := strings.TrimSuffix(name, ".tpl")
		if file == variablesFile {
			return nil, fmt.Errorf("%s: the engine writes %s from the tfvar calls and credentials; rename the template", name, variablesFile)
		}
		text, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		// Parse once here so a broken template fails when the provider loads, not on first use.
		if _, err := template.New(name).Funcs(funcMap(nil)).Parse(string(text)); err != nil {
			return nil, err
		}
		templates[file] = string(text)
	}
	if len(templates) == 0 {
		return nil, fmt.Errorf("no *%s files", templateExt)
	}
	return templates, nil
}

// Templates lists the terraform files the provider renders (without variables.tf).
func (p *Provider) Templates() []string {
	return slices.Sorted(maps.Keys(p.templates))
}

// Validate checks an Infrastructure against the provider's schema and network rules
// without rendering it.
func (p *Provider) Validate(in Input) error {
	doc, err := p.decode(in)
	if err != nil {
		return err
	}
	return p.validate(doc)
}

// Render validates the input and renders the provider's terraform files and tfvars.
func (p *Provider) Render(in Input) (*Rendered, error) {
	doc, err := p.decode(in)
	if err != nil {
		return nil, err
	}
	if err := p.validate(doc); err != nil {
		return nil, err
	}
	return p.render(doc, &renderState{vars: map[string]any{}})
}

// RenderUnvalidated renders without the schema and network checks, and with the
// templates' own `invalid` checks passing; it exists to prove that templates are safe
// even on input validation would have rejected.
func (p *Provider) RenderUnvalidated(in Input) (*Rendered, error) {
	doc, err := p.decode(in)
	if err != nil {
		return nil, err
	}
	return p.render(doc, &renderState{vars: map[string]any{}, unvalidated: true})
}

// input is an Infrastructure and Cluster decoded into plain JSON values.
type input struct {
	infrastructure map[string]any
	providerConfig any
	cluster        map[string]any
	// credentials are the provider's credentials of the secret's kind.
	credentials      []Credential
	workloadIdentity bool
}

func (p *Provider) decode(in Input) (*input, error) {
	infra := in.Infrastructure
	if infra == nil {
		return nil, &ValidationError{Type: p.Manifest.Type, Errors: field.ErrorList{field.Required(field.NewPath("infrastructure"), "")}}
	}
	config, invalid := engine.DecodeObject(field.NewPath("providerConfig"), infra.Spec.ProviderConfig)
	if invalid != nil {
		return nil, &ValidationError{Type: p.Manifest.Type, Errors: field.ErrorList{invalid}}
	}
	cluster, err := decodeCluster(p.Manifest.Type, in.Cluster)
	if err != nil {
		return nil, err
	}
	credentials := p.Manifest.Credentials
	if in.WorkloadIdentity {
		if p.Manifest.WorkloadIdentity == nil {
			return nil, &ValidationError{Type: p.Manifest.Type, Errors: field.ErrorList{field.Invalid(field.NewPath("spec", "secretRef"), infra.Spec.SecretRef.Name,
				fmt.Sprintf("the credentials secret holds a workload identity's token, and provider %q declares no workloadIdentity credentials in provider.yaml", p.Manifest.Type))}}
		}
		credentials = p.Manifest.WorkloadIdentity.Credentials
	}
	return &input{
		credentials:      credentials,
		workloadIdentity: in.WorkloadIdentity,
		infrastructure: map[string]any{
			"name":           infra.Name,
			"namespace":      infra.Namespace,
			"type":           infra.Spec.Type,
			"region":         infra.Spec.Region,
			"sshPublicKey":   string(infra.Spec.SSHPublicKey),
			"uid":            string(infra.UID),
			"providerConfig": config,
		},
		providerConfig: config,
		cluster:        cluster,
	}, nil
}

func (p *Provider) validate(doc *input) error {
	config := doc.providerConfig
	if config == nil {
		config = map[string]any{}
	}
	errs := schemaErrors(p.schema.Validate(config), config)
	// Network rules assume the shapes the schema promises, so they run only on valid shapes.
	if len(errs) == 0 {
		errs = p.Manifest.Networks.check(map[string]any{
			"providerConfig": config,
			"shoot":          doc.cluster["shoot"],
			"seed":           doc.cluster["seed"],
			"cloudProfile":   doc.cluster["cloudProfile"],
		})
	}
	if len(errs) > 0 {
		return &ValidationError{Type: p.Manifest.Type, Errors: errs}
	}
	return nil
}

func (p *Provider) render(doc *input, state *renderState) (*Rendered, error) {
	data := map[string]any{
		"infrastructure":   doc.infrastructure,
		"cluster":          doc.cluster,
		"credentials":      credentialReferences(doc.credentials),
		"workloadIdentity": doc.workloadIdentity,
	}
	return renderTerraform(terraformSet{providerType: p.Manifest.Type, templates: p.templates, helpers: p.helpers}, data, doc.credentials, state)
}

// terraformSet is one set of terraform templates: a provider's, or one of its kinds'.
type terraformSet struct {
	providerType string
	// kind is the kind the set renders; empty for the Infrastructure.
	kind      Kind
	templates map[string]string
	helpers   string
}

// renderTerraform renders every template of set, the variables the templates asked for
// and the credentials' declarations.
func renderTerraform(set terraformSet, data map[string]any, credentials []Credential, state *renderState) (*Rendered, error) {
	name := func(file string) string {
		if set.kind == "" {
			return file
		}
		return string(set.kind) + "/" + file
	}
	out := &Rendered{Files: map[string]string{}}
	for _, file := range slices.Sorted(maps.Keys(set.templates)) {
		text, err := executeHCL(file, set.templates[file], set.helpers, data, state)
		if err != nil {
			return nil, templateError(set.providerType, string(set.kind), name(file), data, err)
		}
		out.Files[file] = text
	}
	out.Files[variablesFile] = variablesTF(state.vars, credentials)
	var err error
	if out.TFVarsJSON, err = json.MarshalIndent(state.vars, "", "  "); err != nil {
		return nil, &RenderError{Type: set.providerType, File: name("terraform.tfvars.json"), Err: err}
	}
	out.TFVarsJSON = append(out.TFVarsJSON, '\n')
	return out, nil
}

// executeHCL runs one terraform template and formats what it wrote.
func executeHCL(file, template, helpers string, data any, state *renderState) (string, error) {
	text, err := executeText(file, template, helpers, funcMap(state), data)
	if err != nil {
		return "", err
	}
	// Rendered text must be HCL; catching it here names the provider file instead of
	// leaving terraform to fail later in a pod.
	if _, diags := hclsyntax.ParseConfig([]byte(text), file, hcl.InitialPos); diags.HasErrors() {
		return "", fmt.Errorf("the template produced invalid HCL: %s", diags.Error())
	}
	return string(hclwrite.Format([]byte(text))), nil
}

// credentialReferences tells templates how to reach each credential: a terraform variable
// reference, or the name of the environment variable the plugin reads (for a file, its
// path); a key read by field is an object of its fields' references.
func credentialReferences(credentials []Credential) map[string]any {
	refs := map[string]any{}
	for _, c := range credentials {
		ref := c.Env
		if c.Variable != "" {
			ref = "var." + c.Variable
		}
		if c.Field == "" {
			refs[c.Key] = ref
			continue
		}
		fields, _ := refs[c.Key].(map[string]any)
		if fields == nil {
			fields = map[string]any{}
			refs[c.Key] = fields
		}
		fields[c.Field] = ref
	}
	return refs
}

// variablesTF declares the tfvars and the credential variables.
func variablesTF(vars map[string]any, credentials []Credential) string {
	var b strings.Builder
	b.WriteString("# Generated: values come from terraform.tfvars.json, credentials from TF_VAR_ environment variables.\n")
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(&b, "\nvariable %q {\n  type = %s\n}\n", name, terraformType(vars[name]))
	}
	for _, c := range credentials {
		if c.Variable == "" {
			continue
		}
		fmt.Fprintf(&b, "\nvariable %q {\n  type      = string\n  sensitive = %t\n", c.Variable, c.Sensitive == nil || *c.Sensitive)
		if c.Optional {
			b.WriteString("  default   = \"\"\n")
		}
		b.WriteString("}\n")
	}
	return string(hclwrite.Format([]byte(b.String())))
}

func terraformType(v any) string {
	switch v := v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case json.Number, float64, int, int64:
		return "number"
	case []any:
		for _, e := range v {
			if _, ok := e.(string); !ok {
				return "any"
			}
		}
		return "list(string)"
	default:
		return "any"
	}
}
