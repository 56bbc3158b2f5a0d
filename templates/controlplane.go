package templates

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates/engine"
)

// The fixed names of a provider's control-plane part, a directory inside the provider's.
const (
	controlPlaneDir      = "controlplane"
	controlPlaneManifest = "controlplane.yaml"
	manifestTemplateExt  = ".yaml.tpl"
)

// ControlPlaneManifest is controlplane/controlplane.yaml: what a control plane needs besides
// its object templates.
type ControlPlaneManifest struct {
	// Description says in one line what the control plane deploys.
	Description string `json:"description,omitempty"`
	// NetworkPolicyLabels are added to the pod templates of every rendered workload, so
	// that the shoot namespace's network policies let the pods reach what they need.
	NetworkPolicyLabels map[string]string `json:"networkPolicyLabels,omitempty"`
	// ProviderStatus is a template rendering the ControlPlane's status.providerStatus, a
	// YAML object with apiVersion and kind; none is reported when empty.
	ProviderStatus string `json:"providerStatus,omitempty"`
}

// ControlPlane is the control-plane part of a provider: Kubernetes objects rendered into the
// shoot namespace from the ControlPlane, its Infrastructure's status and the Cluster.
type ControlPlane struct {
	Manifest  ControlPlaneManifest
	schema    *jsonschema.Schema
	templates map[string]string // template file name -> template text
}

// ControlPlaneInput is what a control plane renders from.
type ControlPlaneInput struct {
	ControlPlane *extensionsv1alpha1.ControlPlane
	// Cluster may be nil; templates then see empty shoot, seed and cloudProfile objects.
	// A Cluster without a seed (a self-hosted shoot's) gives them no .cluster.seed.
	Cluster *extensionsv1alpha1.Cluster
}

// RenderedControlPlane is what to apply for a ControlPlane and what to report.
type RenderedControlPlane struct {
	// Objects are in the ControlPlane's namespace, in template file order.
	Objects []*unstructured.Unstructured
	// ProviderStatus is nil when the provider reports none.
	ProviderStatus *runtime.RawExtension
}

// workloadPodTemplates are where the pod template sits in the workload kinds whose pods
// get the network-policy labels.
var workloadPodTemplates = map[string][]string{
	"apps/Deployment":        {"spec", "template"},
	"apps/StatefulSet":       {"spec", "template"},
	"apps/DaemonSet":         {"spec", "template"},
	"apps/ReplicaSet":        {"spec", "template"},
	"batch/Job":              {"spec", "template"},
	"batch/CronJob":          {"spec", "jobTemplate", "spec", "template"},
	"/Pod":                   {},
	"/ReplicationController": {"spec", "template"},
}

// loadControlPlane reads the control-plane part of the provider in dir, nil when it has none.
func loadControlPlane(fsys fs.FS, dir string) (*ControlPlane, error) {
	cpDir := path.Join(dir, controlPlaneDir)
	raw, err := fs.ReadFile(fsys, path.Join(cpDir, controlPlaneManifest))
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := fs.Stat(fsys, cpDir); statErr == nil {
			return nil, fmt.Errorf("%s/ has no %s", controlPlaneDir, controlPlaneManifest)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	name := path.Join(controlPlaneDir, controlPlaneManifest)
	cp := &ControlPlane{templates: map[string]string{}}
	if err := yaml.UnmarshalStrict(raw, &cp.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for key, value := range cp.Manifest.NetworkPolicyLabels {
		for _, msg := range validation.IsQualifiedName(key) {
			return nil, fmt.Errorf("%s: networkPolicyLabels: key %q: %s", name, key, msg)
		}
		for _, msg := range validation.IsValidLabelValue(value) {
			return nil, fmt.Errorf("%s: networkPolicyLabels[%s]: %s", name, key, msg)
		}
	}
	if _, err := template.New(name).Funcs(manifestFuncMap(nil)).Parse(cp.Manifest.ProviderStatus); err != nil {
		return nil, fmt.Errorf("%s: providerStatus: %w", name, err)
	}

	if cp.schema, err = compileSchema(fsys, path.Join(cpDir, schemaFile), path.Join(controlPlaneDir, schemaFile)); err != nil {
		return nil, err
	}

	entries, err := fs.ReadDir(fsys, cpDir)
	if err != nil {
		return nil, err
	}
	for _, entry := range entries {
		file := entry.Name()
		if entry.IsDir() || !strings.HasSuffix(file, manifestTemplateExt) {
			continue
		}
		text, err := fs.ReadFile(fsys, path.Join(cpDir, file))
		if err != nil {
			return nil, err
		}
		if _, err := template.New(file).Funcs(manifestFuncMap(nil)).Parse(string(text)); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(controlPlaneDir, file), err)
		}
		cp.templates[file] = string(text)
	}
	if len(cp.templates) == 0 {
		return nil, fmt.Errorf("%s/ has no *%s files", controlPlaneDir, manifestTemplateExt)
	}
	return cp, nil
}

// Templates lists the control plane's object templates.
func (c *ControlPlane) Templates() []string {
	return slices.Sorted(maps.Keys(c.templates))
}

// NoControlPlaneError says a provider has no control-plane part.
type NoControlPlaneError struct{ Type string }

func (e *NoControlPlaneError) Error() string {
	return fmt.Sprintf("provider %q has no control plane (no %s/%s)", e.Type, controlPlaneDir, controlPlaneManifest)
}

// RenderControlPlane validates the ControlPlane's providerConfig and renders the objects to
// apply and the providerStatus to report.
func (p *Provider) RenderControlPlane(in ControlPlaneInput) (*RenderedControlPlane, error) {
	return p.renderControlPlane(in, &renderState{vars: map[string]any{}})
}

// RenderControlPlaneUnvalidated renders without the schema, and with the templates' own
// `invalid` checks passing, to prove templates safe on input validation would reject.
func (p *Provider) RenderControlPlaneUnvalidated(in ControlPlaneInput) (*RenderedControlPlane, error) {
	return p.renderControlPlane(in, &renderState{vars: map[string]any{}, unvalidated: true})
}

func (p *Provider) renderControlPlane(in ControlPlaneInput, state *renderState) (*RenderedControlPlane, error) {
	cp := p.ControlPlane
	if cp == nil {
		return nil, &NoControlPlaneError{Type: p.Manifest.Type}
	}
	data, err := p.controlPlaneData(in)
	if err != nil {
		return nil, err
	}
	if !state.unvalidated {
		config := data["controlPlane"].(map[string]any)["providerConfig"]
		if config == nil {
			config = map[string]any{}
		}
		if errs := schemaErrors(cp.schema.Validate(config), config); len(errs) > 0 {
			return nil, p.controlPlaneInvalid(errs)
		}
	}
	out := &RenderedControlPlane{}
	if out.Objects, err = cp.renderObjects(p.Manifest.Type, data, in.ControlPlane.Namespace, state); err != nil {
		return nil, err
	}
	if out.ProviderStatus, err = cp.renderProviderStatus(p.Manifest.Type, data, state); err != nil {
		return nil, err
	}
	return out, nil
}

// renderObjects renders every object template into namespace, with the network-policy
// labels on the workloads' pods.
func (cp *ControlPlane) renderObjects(providerType string, data map[string]any, namespace string, state *renderState) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	seen := map[string]string{}
	for _, file := range cp.Templates() {
		name := path.Join(controlPlaneDir, file)
		fileError := func(err error) error { return &RenderError{Type: providerType, File: name, Err: err} }
		text, err := executeManifest(file, cp.templates[file], data, state)
		if err != nil {
			return nil, templateError(providerType, controlPlaneObject, name, data, err)
		}
		objects, err := decodeObjects(text)
		if err != nil {
			return nil, fileError(err)
		}
		for _, obj := range objects {
			if err := placeObject(obj, namespace); err != nil {
				return nil, fileError(err)
			}
			id := obj.GroupVersionKind().GroupKind().String() + "/" + obj.GetName()
			if other, ok := seen[id]; ok {
				return nil, fileError(fmt.Errorf("%s is rendered twice (also by %s)", id, other))
			}
			seen[id] = file
			if err := addPodLabels(obj, cp.Manifest.NetworkPolicyLabels); err != nil {
				return nil, fileError(err)
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

// renderProviderStatus renders the manifest's providerStatus; nil when it declares none.
func (cp *ControlPlane) renderProviderStatus(providerType string, data map[string]any, state *renderState) (*runtime.RawExtension, error) {
	if strings.TrimSpace(cp.Manifest.ProviderStatus) == "" {
		return nil, nil
	}
	name := path.Join(controlPlaneDir, controlPlaneManifest) + ": providerStatus"
	text, err := executeManifest(name, cp.Manifest.ProviderStatus, data, state)
	if err != nil {
		return nil, templateError(providerType, controlPlaneObject, name, data, err)
	}
	status := map[string]any{}
	if err := yaml.Unmarshal([]byte(text), &status); err != nil {
		return nil, &RenderError{Type: providerType, File: name, Err: fmt.Errorf("not a YAML object: %w", err)}
	}
	if status["apiVersion"] == nil || status["kind"] == nil {
		return nil, &RenderError{Type: providerType, File: name, Err: errors.New("the providerStatus needs apiVersion and kind")}
	}
	return &runtime.RawExtension{Raw: mustJSON(status)}, nil
}

// controlPlaneObject is what a ValidationError of a ControlPlane calls it.
const controlPlaneObject = "control plane"

func (p *Provider) controlPlaneInvalid(errs field.ErrorList) error {
	return &ValidationError{Type: p.Manifest.Type, Object: controlPlaneObject, Errors: errs}
}

// controlPlaneData is the templates' input. Credentials are only referenced by the
// secret's name: their values never enter an object that is applied.
func (p *Provider) controlPlaneData(in ControlPlaneInput) (map[string]any, error) {
	cp := in.ControlPlane
	if cp == nil {
		return nil, p.controlPlaneInvalid(field.ErrorList{field.Required(field.NewPath("controlPlane"), "")})
	}
	config, invalid := engine.DecodeObject(field.NewPath("providerConfig"), cp.Spec.ProviderConfig)
	if invalid != nil {
		return nil, p.controlPlaneInvalid(field.ErrorList{invalid})
	}
	infraStatus, invalid := engine.DecodeObject(field.NewPath("infrastructureProviderStatus"), cp.Spec.InfrastructureProviderStatus)
	if invalid != nil {
		return nil, p.controlPlaneInvalid(field.ErrorList{invalid})
	}
	if infraStatus == nil {
		infraStatus = map[string]any{}
	}
	cluster, err := decodeCluster(p.Manifest.Type, in.Cluster)
	if err != nil {
		return nil, err
	}
	if invalid := checkPurpose(cp.Spec.Purpose); invalid != nil {
		return nil, p.controlPlaneInvalid(field.ErrorList{invalid})
	}
	secretNamespace := cp.Spec.SecretRef.Namespace
	if secretNamespace == "" {
		secretNamespace = cp.Namespace
	}
	return map[string]any{
		"controlPlane": map[string]any{
			"name":                         cp.Name,
			"namespace":                    cp.Namespace,
			"type":                         cp.Spec.Type,
			"region":                       cp.Spec.Region,
			"purpose":                      string(extensionsv1alpha1.PurposeNormal),
			"providerConfig":               config,
			"infrastructureProviderStatus": infraStatus,
			"secretRef":                    map[string]any{"name": cp.Spec.SecretRef.Name, "namespace": secretNamespace},
		},
		"cluster": cluster,
	}, nil
}

// checkPurpose refuses a ControlPlane that still has a purpose other than normal: Gardener
// removed spec.purpose in v1.123, and its exposure control planes, which no provider of
// terraseed deploys, with it. One without a purpose is a shoot's control plane.
func checkPurpose(purpose *extensionsv1alpha1.Purpose) *field.Error {
	if purpose == nil || *purpose == extensionsv1alpha1.PurposeNormal {
		return nil
	}
	return field.Invalid(field.NewPath("spec", "purpose"), string(*purpose),
		`Gardener removed the field in v1.123 and creates no exposure control planes since; leave it out (or "normal") for a shoot's control plane`)
}

// decodeObjects reads the YAML documents of a rendered template; empty documents are skipped.
func decodeObjects(text string) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var objects []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objects, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		asJSON, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if trimmed := strings.TrimSpace(string(asJSON)); trimmed == "null" || trimmed == "{}" {
			continue
		}
		if !strings.HasPrefix(strings.TrimSpace(string(asJSON)), "{") {
			return nil, fmt.Errorf("document %d is not a YAML object", i)
		}
		// Decoded from JSON, numbers are int64 where they are integers, as the API expects.
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(asJSON); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			return nil, fmt.Errorf("document %d has no apiVersion or kind", i)
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("document %d (%s) has no metadata.name", i, obj.GetKind())
		}
		objects = append(objects, obj)
	}
}

// placeObject puts obj into the ControlPlane's namespace: a control plane deploys into the
// shoot namespace only.
func placeObject(obj *unstructured.Unstructured, namespace string) error {
	if ns := obj.GetNamespace(); ns != "" && ns != namespace {
		return fmt.Errorf("%s %s is in namespace %q: control-plane objects belong in the ControlPlane's namespace; leave metadata.namespace out", obj.GetKind(), obj.GetName(), ns)
	}
	if obj.GetKind() == "Namespace" && obj.GroupVersionKind().Group == "" {
		return fmt.Errorf("a control plane deploys into the shoot namespace and cannot create namespaces: Namespace %s", obj.GetName())
	}
	obj.SetNamespace(namespace)
	return nil
}

// addPodLabels adds the network-policy labels to the pods a workload runs.
func addPodLabels(obj *unstructured.Unstructured, podLabels map[string]string) error {
	if len(podLabels) == 0 {
		return nil
	}
	gvk := obj.GroupVersionKind()
	templatePath, ok := workloadPodTemplates[gvk.Group+"/"+gvk.Kind]
	if !ok {
		return nil
	}
	labelsPath := append(slices.Clone(templatePath), "metadata", "labels")
	labels, _, err := unstructured.NestedStringMap(obj.Object, labelsPath...)
	if err != nil {
		return fmt.Errorf("%s %s: %s: %w", gvk.Kind, obj.GetName(), strings.Join(labelsPath, "."), err)
	}
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, podLabels)
	return unstructured.SetNestedStringMap(obj.Object, labels, labelsPath...)
}
