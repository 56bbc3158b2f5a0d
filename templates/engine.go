package templates

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"text/template"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/terraseed/terraseed/templates/engine"
)

// funcMap is engine.Funcs, refusing or not as the render validates, plus tfvar, which
// records the render's variables in state.
func funcMap(state *renderState) template.FuncMap {
	if state == nil {
		state = &renderState{vars: map[string]any{}}
	}
	funcs := engine.Funcs(state.unvalidated)
	funcs["tfvar"] = state.tfvar
	return funcs
}

// manifestFuncMap is funcMap without tfvar: values reach manifests as YAML text, which
// templates write with toJson (JSON is YAML) so that a user's string stays one value.
func manifestFuncMap(state *renderState) template.FuncMap {
	funcs := funcMap(state)
	delete(funcs, "tfvar")
	return funcs
}

// executeText runs one template on data; a missing map key is an error. helpers are
// the provider's named templates (its _*.tpl files) that text may call.
func executeText(name, text, helpers string, funcs template.FuncMap, data any) (string, error) {
	tpl, err := template.New(name).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return "", err
	}
	if helpers != "" {
		if _, err := tpl.New(helpersName).Parse(helpers); err != nil {
			return "", err
		}
	}
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func executeManifest(name, text string, data any, state *renderState) (string, error) {
	return executeText(name, text, "", manifestFuncMap(state), data)
}

// renderState collects the tfvars the templates ask for during one render.
type renderState struct {
	vars map[string]any
	// unvalidated lets every `invalid` check pass, and iniValue escape what it refuses.
	unvalidated bool
}

// tfvar records value as terraform variable name and returns the reference to it, so a
// template can use a user's value without pasting it into HCL.
func (s *renderState) tfvar(name string, value any) (string, error) {
	if !variableName.MatchString(name) {
		return "", fmt.Errorf("tfvar: %q is not a terraform identifier", name)
	}
	if value == nil {
		return "", fmt.Errorf("tfvar %q: the value is missing (guard optional fields with hasKey)", name)
	}
	if old, ok := s.vars[name]; ok && !reflect.DeepEqual(old, value) {
		return "", fmt.Errorf("tfvar %q is set twice with different values", name)
	}
	s.vars[name] = value
	return "var." + name, nil
}

// templateError reports a template's failure on file: a template refusing the input
// (`invalid`, iniValue), or reading the seed of a Cluster without one, is a
// ValidationError of object (see ValidationError.Object), any other failure the provider
// author's RenderError. data is what the template ran on.
func templateError(providerType, object, file string, data map[string]any, err error) error {
	var rejected *engine.Rejected
	if errors.As(err, &rejected) {
		return &ValidationError{Type: providerType, Object: object, Errors: field.ErrorList{
			field.Invalid(field.NewPath(rejected.Field), shownValue(rejected.Value), rejected.Detail)}}
	}
	if missing := engine.MissingSeed(data["cluster"], err); missing != nil {
		return &ValidationError{Type: providerType, Object: object, Errors: field.ErrorList{missing}}
	}
	return &RenderError{Type: providerType, File: file, Err: err}
}
