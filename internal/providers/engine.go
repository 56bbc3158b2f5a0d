package providers

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/Masterminds/sprig/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// funcMap is sprig's text functions without those that read the machine (environment
// variables hold credentials) or the network, plus tfvar.
func funcMap(state *renderState) template.FuncMap {
	funcs := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(funcs, name)
	}
	if state == nil {
		state = &renderState{vars: map[string]any{}}
	}
	funcs["tfvar"] = state.tfvar
	funcs["invalid"] = state.invalid
	funcs["iniValue"] = state.iniValue
	return funcs
}

// manifestFuncMap is funcMap without tfvar: values reach manifests as YAML text, which
// templates write with toJson (JSON is YAML) so that a user's string stays one value.
func manifestFuncMap(state *renderState) template.FuncMap {
	funcs := funcMap(state)
	delete(funcs, "tfvar")
	return funcs
}

// mutationFuncs are the templates' functions without tfvar and invalid, which only mean
// something in terraform templates, and without those whose result changes from call to
// call: a mutation must give the same Deployment every time Gardener writes it. The
// templates parsed with them run in concurrent admissions: of the functions bound to a
// render's state only iniValue is left, and it reads that state (validated, never
// written) without changing it.
func mutationFuncs() template.FuncMap {
	funcs := funcMap(nil)
	for _, name := range []string{"tfvar", "invalid",
		"now", "date", "dateInZone", "date_in_zone", "ago", "htmlDate", "htmlDateInZone", "unixEpoch", "duration",
		"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt", "shuffle", "uuidv4",
		"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
		"bcrypt", "htpasswd", "encryptAES"} {
		delete(funcs, name)
	}
	return funcs
}

// executeText runs one template on data; a missing map key is an error.
func executeText(name, text string, funcs template.FuncMap, data any) (string, error) {
	tpl, err := template.New(name).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func executeManifest(name, text string, data any, state *renderState) (string, error) {
	return executeText(name, text, manifestFuncMap(state), data)
}

// renderState collects the tfvars the templates ask for during one render.
type renderState struct {
	vars map[string]any
	// unvalidated lets every `invalid` check pass.
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

// invalid lets a template refuse an input it cannot render, naming the field, as the
// schema would: `{{ invalid "providerConfig.x" $value "why" }}`.
func (s *renderState) invalid(field string, value any, detail string) (string, error) {
	if s.unvalidated {
		return "", nil
	}
	return "", &inputRejected{field: field, value: value, detail: detail}
}

// iniValue returns value for one line of an INI file (a cloud-provider config), refusing,
// naming the field, a value holding a control character: a newline in it would add keys
// or sections. Unvalidated renders escape them instead, so the result stays one line.
func (s *renderState) iniValue(field string, value any) (string, error) {
	text := fmt.Sprint(value)
	if !strings.ContainsFunc(text, unicode.IsControl) {
		return text, nil
	}
	if s.unvalidated {
		quoted := strconv.QuoteToASCII(text)
		return quoted[1 : len(quoted)-1], nil
	}
	return "", &inputRejected{field: field, value: text, detail: "holds a control character (such as a newline), which an INI line cannot hold"}
}

// inputRejected is raised by a template's `invalid`: the input passed the schema, but the
// provider cannot render it.
type inputRejected struct {
	field  string
	value  any
	detail string
}

func (e *inputRejected) Error() string { return e.field + ": " + e.detail }

// templateError reports a template's failure on file: a template refusing the input
// (`invalid`, iniValue) is a ValidationError of object (see ValidationError.Object), any
// other failure the provider author's RenderError.
func templateError(providerType, object, file string, err error) error {
	var rejected *inputRejected
	if errors.As(err, &rejected) {
		return &ValidationError{Type: providerType, Object: object, Errors: field.ErrorList{
			field.Invalid(field.NewPath(rejected.field), shownValue(rejected.value), rejected.detail)}}
	}
	return &RenderError{Type: providerType, File: file, Err: err}
}
