package mutations

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates/engine"
)

// mutationsFile is optional: a provider without it leaves the control plane as Gardener
// deploys it.
const mutationsFile = "mutations.yaml"

// ControlPlaneDeployments are the Deployments of a shoot's control plane that Gardener
// deploys into the shoot namespace, by name, with the value of the `role` label Gardener
// gives them (all of them also carry app=kubernetes). A provider mutates these only.
var ControlPlaneDeployments = map[string]string{
	"kube-apiserver":          "apiserver",
	"kube-controller-manager": "controller-manager",
	"kube-scheduler":          "scheduler",
}

// Set is a provider's mutations.yaml: what the control-plane webhook changes in Gardener's
// control-plane Deployments of the provider's shoot namespaces.
type Set struct {
	// Deployments by name (kube-apiserver, kube-controller-manager, kube-scheduler): for
	// every Kubernetes version of the shoot.
	Deployments map[string]Deployment `json:"deployments,omitempty"`
	// Versions are mutations for the shoot Kubernetes versions that meet a constraint,
	// applied after Deployments, in the file's order.
	Versions []Version `json:"versions,omitempty"`

	// providerType is the provider's type, which errors name and templates read.
	providerType string
	// raw is the file as plain values; its strings are templates, rendered per request.
	raw map[string]any
	// parsed holds each templated string of raw, parsed when the provider loads, by its
	// field path: an admission only executes them. A parsed template is executed by
	// concurrent admissions: each execution gets its own data, and no function changes a
	// state shared between executions (mutationFuncs).
	parsed map[string]*template.Template
	// names is DeploymentNames, and byDeployment every entry of the file for a
	// Deployment, in order, both found when the provider loads.
	names        []string
	byDeployment map[string][]mutationPart
}

// Version is a mutation for some Kubernetes versions of the shoot only.
type Version struct {
	// KubernetesVersion is a semantic version constraint (`< 1.27`, `>= 1.27, < 1.31`) on
	// the shoot's spec.kubernetes.version, read from the namespace's Cluster.
	KubernetesVersion string `json:"kubernetesVersion"`
	// Deployments by name, as in Set.
	Deployments map[string]Deployment `json:"deployments"`

	constraint *semver.Constraints
}

// Deployment changes one Deployment's pod template.
type Deployment struct {
	// Containers by name.
	Containers map[string]Container `json:"containers"`
	// Volumes are added to the pod, or replace the pod's volume of the same name.
	Volumes []corev1.Volume `json:"volumes,omitempty"`
}

// Container changes one container.
type Container struct {
	// Flags are `--name=value` (or `--name`): each replaces every `--name` and `--name=...`
	// in the container's command and args, or is appended when there is none.
	Flags []string `json:"flags,omitempty"`
	// ListFlags are `--name=a,b`: each value is added once to the comma-separated list of
	// every `--name=...`, or `--name=a,b` is appended when there is none.
	ListFlags []string `json:"listFlags,omitempty"`
	// Env variables are added, or replace the variable of the same name.
	Env []corev1.EnvVar `json:"env,omitempty"`
	// VolumeMounts are added, or replace the mount of the same volume name.
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}

// Input is what a mutation's templates may read.
type Input struct {
	// Namespace is the shoot namespace of the Deployment.
	Namespace string
	// Cluster is the namespace's Cluster (its name equals the namespace); nil when there is
	// none, and the templates then see empty shoot, seed and cloudProfile objects. A
	// Cluster without a seed (a self-hosted shoot's) gives the templates no .cluster.seed.
	Cluster *extensionsv1alpha1.Cluster
}

// Error says a mutation could not be rendered for a Deployment: a template failed,
// or rendered a value that is not valid where it lands.
type Error struct {
	Type       string
	Deployment string
	Err        error
}

func (e *Error) Error() string {
	return fmt.Sprintf("mutating %s for provider %q: %v", e.Deployment, e.Type, e.Err)
}
func (e *Error) Unwrap() error { return e.Err }

// DeploymentNames lists the Deployments the mutations change for some Kubernetes
// version, sorted.
func (m *Set) DeploymentNames() []string { return slices.Clone(m.names) }

// ReadsCluster says whether rendering reads the namespace's Cluster: a value is a
// template, or a mutation depends on the shoot's Kubernetes version.
func (m *Set) ReadsCluster() bool { return len(m.parsed) > 0 || len(m.Versions) > 0 }

// kubernetesVersionPath is where a mutation's version constraints look in the Cluster.
var kubernetesVersionPath = field.NewPath("cluster", "spec", "shoot", "spec", "kubernetes", "version")

// shootKubernetesVersion reads the Kubernetes version of a Cluster's decoded shoot as a
// semantic version without pre-release or build metadata (1.31.0-rc.1 compares as 1.31.0),
// or fails naming the field.
func shootKubernetesVersion(shoot any) (*semver.Version, error) {
	value, _ := dig(shoot, "spec", "kubernetes", "version")
	text, ok := value.(string)
	if !ok || text == "" {
		if value == nil {
			return nil, field.Required(kubernetesVersionPath, "the Cluster's shoot has no Kubernetes version")
		}
		return nil, field.Invalid(kubernetesVersionPath, value, "must be a string")
	}
	v, err := semver.NewVersion(text)
	if err != nil {
		return nil, field.Invalid(kubernetesVersionPath, text, "not a semantic version: "+err.Error())
	}
	core := semver.New(v.Major(), v.Minor(), v.Patch(), "", "")
	return core, nil
}

// dig reads a nested field of decoded JSON; false when a step is missing.
func dig(v any, keys ...string) (any, bool) {
	for _, key := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// Render renders the mutation of one Deployment; nil when the provider leaves it alone,
// as a nil Set (a provider without mutations.yaml) does every Deployment. The mutations
// for every version come first, then those of each version entry the shoot's Kubernetes
// version meets: a later flag, variable, mount or volume of the same name replaces an
// earlier one where it is applied.
func (m *Set) Render(deployment string, in Input) (*Deployment, error) {
	if m == nil || len(m.byDeployment[deployment]) == 0 {
		return nil, nil
	}
	out, err := m.render(deployment, in)
	if err != nil {
		return nil, &Error{Type: m.providerType, Deployment: deployment, Err: err}
	}
	return out, nil
}

// render renders the parts of the mutations that apply to deployment and adds them up in order.
func (m *Set) render(deployment string, in Input) (*Deployment, error) {
	data, err := mutationData(m.providerType, in)
	if err != nil {
		return nil, err
	}
	parts, err := m.parts(deployment, in.Cluster, data)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	out := &Deployment{Containers: map[string]Container{}}
	for _, part := range parts {
		d := part.literal.deepCopy()
		if d == nil {
			if d, err = m.renderPart(part, data); err != nil {
				return nil, err
			}
		}
		out.add(d)
	}
	return out, nil
}

// mutationData is what a mutation's templates see: the namespace, the provider type and
// the Cluster, named after the namespace when there is none.
func mutationData(providerType string, in Input) (map[string]any, error) {
	cluster, invalid := engine.DecodeCluster(in.Cluster)
	if invalid != nil {
		return nil, field.ErrorList{invalid}.ToAggregate()
	}
	cluster["name"] = in.Namespace
	if in.Cluster != nil {
		cluster["name"] = in.Cluster.Name
	}
	return map[string]any{"namespace": in.Namespace, "type": providerType, "cluster": cluster}, nil
}

// mutationPart is one entry of mutations.yaml for a Deployment: where it is in the file,
// and its value as written.
type mutationPart struct {
	root *field.Path
	raw  any
	// version is the index of the versions entry; -1 for deployments, every version's.
	version int
	// literal is the entry decoded and checked when the provider loads, when it holds no
	// template: an admission copies it instead of rendering it again.
	literal *Deployment
}

// findParts lists the file's entries for each Deployment, in order: the one for every
// version, then those of the version entries; and decodes those without templates.
func (m *Set) findParts() {
	m.byDeployment = map[string][]mutationPart{}
	deployments, _ := m.raw["deployments"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(m.Deployments)) {
		m.byDeployment[name] = append(m.byDeployment[name], mutationPart{root: field.NewPath("deployments").Key(name), raw: deployments[name], version: -1})
	}
	for i, v := range m.Versions {
		for _, name := range slices.Sorted(maps.Keys(v.Deployments)) {
			raw := m.raw["versions"].([]any)[i].(map[string]any)["deployments"].(map[string]any)[name]
			m.byDeployment[name] = append(m.byDeployment[name], mutationPart{
				root: field.NewPath("versions").Index(i).Child("deployments").Key(name), raw: raw, version: i})
		}
	}
	for name, parts := range m.byDeployment {
		for i, part := range parts {
			if hasTemplate(part.raw) {
				continue
			}
			// Without templates the data is never read; a part that fails here fails
			// the same way in every admission, which renders it then.
			if d, err := m.renderPart(part, nil); err == nil {
				parts[i].literal = d
			}
		}
		m.names = append(m.names, name)
	}
	slices.Sort(m.names)
}

// hasTemplate says whether a plain value holds a template anywhere.
func hasTemplate(v any) bool {
	switch v := v.(type) {
	case string:
		return isTemplate(v)
	case map[string]any:
		for _, e := range v {
			if hasTemplate(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasTemplate(e) {
				return true
			}
		}
	}
	return false
}

// parts are the entries for deployment that apply to the Cluster's shoot (decoded in
// data), in order: the one for every version, then those of the version entries the
// shoot meets.
func (m *Set) parts(deployment string, cluster *extensionsv1alpha1.Cluster, data map[string]any) ([]mutationPart, error) {
	var parts []mutationPart
	var version *semver.Version
	for _, part := range m.byDeployment[deployment] {
		if part.version < 0 {
			parts = append(parts, part)
			continue
		}
		if version == nil {
			var err error
			if cluster == nil {
				err = field.Required(kubernetesVersionPath, "there is no Cluster for the namespace")
			} else {
				version, err = shootKubernetesVersion(data["cluster"].(map[string]any)["shoot"])
			}
			if err != nil {
				vp := field.NewPath("versions").Index(part.version)
				return nil, fmt.Errorf("%w (%s depends on it)", err, vp.Child("kubernetesVersion"))
			}
		}
		if m.Versions[part.version].constraint.Check(version) {
			parts = append(parts, part)
		}
	}
	return parts, nil
}

// renderPart executes the templates of one part on data and checks the result like a
// literal mutation.
func (m *Set) renderPart(part mutationPart, data map[string]any) (*Deployment, error) {
	rendered, err := renderValues(part.root, part.raw, false, func(p *field.Path, _ string) (string, error) {
		tpl, ok := m.parsed[p.String()]
		if !ok {
			return "", fmt.Errorf("no template was parsed for %s when the provider loaded", p)
		}
		var out strings.Builder
		err := tpl.Execute(&out, data)
		if missing := engine.MissingSeed(data["cluster"], err); missing != nil {
			return "", missing
		}
		return out.String(), err
	})
	if err != nil {
		return nil, err
	}
	var d Deployment
	if err := decodeRendered(rendered, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", part.root, err)
	}
	if errs := d.validate(part.root); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &d, nil
}

// deepCopy is a copy sharing nothing with d; nil for nil.
func (d *Deployment) deepCopy() *Deployment {
	if d == nil {
		return nil
	}
	out := &Deployment{Containers: make(map[string]Container, len(d.Containers))}
	for name, c := range d.Containers {
		out.Containers[name] = Container{
			Flags:        slices.Clone(c.Flags),
			ListFlags:    slices.Clone(c.ListFlags),
			Env:          deepCopies(c.Env, (*corev1.EnvVar).DeepCopy),
			VolumeMounts: deepCopies(c.VolumeMounts, (*corev1.VolumeMount).DeepCopy),
		}
	}
	out.Volumes = deepCopies(d.Volumes, (*corev1.Volume).DeepCopy)
	return out
}

// deepCopies copies items with their DeepCopy; nil stays nil.
func deepCopies[T any](items []T, deepCopy func(*T) *T) []T {
	if items == nil {
		return nil
	}
	out := make([]T, len(items))
	for i := range items {
		out[i] = *deepCopy(&items[i])
	}
	return out
}

// add appends another mutation's changes after this one's.
func (d *Deployment) add(other *Deployment) {
	for name, c := range other.Containers {
		mine := d.Containers[name]
		mine.Flags = append(mine.Flags, c.Flags...)
		mine.ListFlags = append(mine.ListFlags, c.ListFlags...)
		mine.Env = append(mine.Env, c.Env...)
		mine.VolumeMounts = append(mine.VolumeMounts, c.VolumeMounts...)
		d.Containers[name] = mine
	}
	d.Volumes = append(d.Volumes, other.Volumes...)
}

// Load reads and checks the optional mutations.yaml of the provider directory dir, whose
// provider has the type providerType; nil when there is none. A broken file fails here,
// naming it and the field, so that the provider fails to load.
func Load(fsys fs.FS, dir, providerType string) (*Set, error) {
	text, err := fs.ReadFile(fsys, path.Join(dir, mutationsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := &Set{providerType: providerType}
	if err := yaml.UnmarshalStrict(text, m); err != nil {
		return nil, fmt.Errorf("%s: %w", mutationsFile, err)
	}
	if err := yaml.Unmarshal(text, &m.raw); err != nil {
		return nil, fmt.Errorf("%s: %w", mutationsFile, err)
	}
	errs := m.validate()
	// Parse every template now, so a broken one fails when the provider loads, not in an
	// admission request, and an admission does not parse again.
	m.parsed = map[string]*template.Template{}
	funcs := mutationFuncs()
	parse := func(p *field.Path, text string) (string, error) {
		tpl, err := template.New(p.String()).Option("missingkey=error").Funcs(funcs).Parse(text)
		if err != nil {
			errs = append(errs, field.Invalid(p, text, "not a template: "+err.Error()))
		}
		m.parsed[p.String()] = tpl
		return text, nil
	}
	_, _ = renderValues(field.NewPath("deployments"), m.raw["deployments"], true, parse)
	versions, _ := m.raw["versions"].([]any)
	for i, v := range versions {
		if v, ok := v.(map[string]any); ok {
			_, _ = renderValues(field.NewPath("versions").Index(i).Child("deployments"), v["deployments"], true, parse)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", mutationsFile, errs.ToAggregate())
	}
	m.findParts()
	return m, nil
}

// mutationFuncs are the engine's functions without invalid, which only means something in
// a provider's templates, and without those whose result changes from call to call: a
// mutation must give the same Deployment every time Gardener writes it. The templates
// parsed with them run in concurrent admissions: iniValue, the one function left that
// depends on how a render validates, only reads that setting.
func mutationFuncs() template.FuncMap {
	funcs := engine.Funcs(false)
	for _, name := range []string{"invalid",
		"now", "date", "dateInZone", "date_in_zone", "ago", "htmlDate", "htmlDateInZone", "unixEpoch", "duration",
		"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt", "shuffle", "uuidv4",
		"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
		"bcrypt", "htpasswd", "encryptAES"} {
		delete(funcs, name)
	}
	return funcs
}

func (m *Set) validate() field.ErrorList {
	root := field.NewPath("deployments")
	if len(m.Deployments) == 0 && len(m.Versions) == 0 {
		return field.ErrorList{field.Required(root, "name at least one Deployment, or remove "+mutationsFile)}
	}
	errs := validateDeployments(root, m.Deployments)
	for i := range m.Versions {
		v := &m.Versions[i]
		vp := field.NewPath("versions").Index(i)
		var err error
		switch {
		case strings.TrimSpace(v.KubernetesVersion) == "":
			errs = append(errs, field.Required(vp.Child("kubernetesVersion"), "a semantic version constraint such as \"< 1.27\" or \">= 1.27, < 1.31\""))
		case isTemplate(v.KubernetesVersion):
			errs = append(errs, field.Invalid(vp.Child("kubernetesVersion"), v.KubernetesVersion, "cannot be a template"))
		default:
			if v.constraint, err = semver.NewConstraint(v.KubernetesVersion); err != nil {
				errs = append(errs, field.Invalid(vp.Child("kubernetesVersion"), v.KubernetesVersion, "not a semantic version constraint: "+err.Error()))
			}
		}
		if len(v.Deployments) == 0 {
			errs = append(errs, field.Required(vp.Child("deployments"), "name at least one Deployment"))
		}
		errs = append(errs, validateDeployments(vp.Child("deployments"), v.Deployments)...)
	}
	return errs
}

func validateDeployments(root *field.Path, deployments map[string]Deployment) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(deployments)) {
		p := root.Key(name)
		if _, ok := ControlPlaneDeployments[name]; !ok {
			errs = append(errs, field.NotSupported(root, name, slices.Sorted(maps.Keys(ControlPlaneDeployments))))
			continue
		}
		d := deployments[name]
		errs = append(errs, d.validate(p)...)
	}
	return errs
}

var flagName = regexp.MustCompile(`^--[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (d *Deployment) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(d.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), "name at least one container"))
	}
	for _, name := range slices.Sorted(maps.Keys(d.Containers)) {
		cp := p.Child("containers").Key(name)
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("containers"), name, strings.Join(msgs, "; ")))
		}
		c := d.Containers[name]
		errs = append(errs, c.validate(cp)...)
	}
	seen := map[string]bool{}
	for i, v := range d.Volumes {
		vp := p.Child("volumes").Index(i)
		errs = append(errs, dnsLabel(vp.Child("name"), v.Name, seen)...)
		var sources map[string]any
		_ = json.Unmarshal(mustJSON(v.VolumeSource), &sources)
		if len(sources) != 1 {
			errs = append(errs, field.Invalid(vp, v.Name, fmt.Sprintf("set exactly one volume source (configMap, secret, emptyDir, ...), not %d", len(sources))))
		}
	}
	return errs
}

func (c *Container) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]*field.Path{}
	checkFlag := func(fp *field.Path, flag string, list bool) {
		name, value, hasValue := strings.Cut(flag, "=")
		switch {
		case !flagName.MatchString(name):
			errs = append(errs, field.Invalid(fp, flag, "must be --name=value or --name, and the name cannot be a template"))
			return
		case list && (!hasValue || slices.Contains(strings.Split(value, ","), "")):
			errs = append(errs, field.Invalid(fp, flag, "must be --name=value[,value...] with no empty value"))
		}
		if first, ok := names[name]; ok {
			errs = append(errs, field.Duplicate(fp, fmt.Sprintf("%s is already set at %s", name, first)))
		}
		names[name] = fp
	}
	for i, flag := range c.Flags {
		checkFlag(p.Child("flags").Index(i), flag, false)
	}
	for i, flag := range c.ListFlags {
		checkFlag(p.Child("listFlags").Index(i), flag, true)
	}
	seen := map[string]bool{}
	for i, e := range c.Env {
		ep := p.Child("env").Index(i).Child("name")
		if isTemplate(e.Name) {
			continue
		}
		if msgs := validation.IsEnvVarName(e.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(ep, e.Name, strings.Join(msgs, "; ")))
		} else if seen[e.Name] {
			errs = append(errs, field.Duplicate(ep, e.Name))
		}
		seen[e.Name] = true
	}
	seen = map[string]bool{}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		errs = append(errs, dnsLabel(mp.Child("name"), m.Name, seen)...)
		if !isTemplate(m.MountPath) && !strings.HasPrefix(m.MountPath, "/") {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
		}
	}
	return errs
}

// isTemplate says a value is checked once rendered, not when the provider loads.
func isTemplate(s string) bool { return strings.Contains(s, "{{") }

func dnsLabel(p *field.Path, name string, seen map[string]bool) field.ErrorList {
	if isTemplate(name) {
		return nil
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, strings.Join(msgs, "; "))}
	}
	if seen[name] {
		return field.ErrorList{field.Duplicate(p, name)}
	}
	seen[name] = true
	return nil
}

// renderValues copies a plain value, passing every string that holds a template action
// through render. names says v is a map keyed by name (deployments, containers), which
// field paths show as [name].
func renderValues(p *field.Path, v any, names bool, render func(*field.Path, string) (string, error)) (any, error) {
	switch v := v.(type) {
	case string:
		if !isTemplate(v) {
			return v, nil
		}
		out, err := render(p, v)
		if err != nil {
			return nil, field.Invalid(p, v, err.Error())
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, key := range slices.Sorted(maps.Keys(v)) {
			child := p.Child(key)
			if names {
				child = p.Key(key)
			}
			r, err := renderValues(child, v[key], !names && key == "containers", render)
			if err != nil {
				return nil, err
			}
			out[key] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := renderValues(p.Index(i), e, false, render)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

// decodeRendered decodes a rendered mutation strictly: its JSON straight, as
// yaml.UnmarshalStrict does after converting YAML into JSON, which JSON is already; when
// that fails, yaml.UnmarshalStrict tells why.
func decodeRendered(v any, into *Deployment) error {
	data := mustJSON(v)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err == nil {
		return nil
	}
	*into = Deployment{}
	return yaml.UnmarshalStrict(data, into)
}

// mustJSON is for values this package built itself.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
