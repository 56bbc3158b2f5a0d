package engine

import (
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/Masterminds/sprig/v3"
)

// Funcs are sprig's text functions without those that read the machine (environment
// variables hold credentials) or the network, plus invalid and iniValue, which refuse an
// input; an unvalidated render lets invalid pass and iniValue escape instead. Each call
// returns a new map, which the caller may change.
func Funcs(unvalidated bool) template.FuncMap {
	funcs := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(funcs, name)
	}
	funcs["invalid"] = func(field string, value any, detail string) (string, error) {
		return invalid(unvalidated, field, value, detail)
	}
	funcs["iniValue"] = func(field string, value any) (string, error) {
		return iniValue(unvalidated, field, value)
	}
	return funcs
}

// invalid lets a template refuse an input it cannot render, naming the field, as the
// schema would: `{{ invalid "providerConfig.x" $value "why" }}`.
func invalid(unvalidated bool, field string, value any, detail string) (string, error) {
	if unvalidated {
		return "", nil
	}
	return "", &Rejected{Field: field, Value: value, Detail: detail}
}

// iniValue returns value for one line of an INI file (a cloud-provider config), refusing,
// naming the field, a value holding a control character: a newline in it would add keys
// or sections. Unvalidated renders escape them instead, so the result stays one line.
func iniValue(unvalidated bool, field string, value any) (string, error) {
	text := fmt.Sprint(value)
	if !strings.ContainsFunc(text, unicode.IsControl) {
		return text, nil
	}
	if unvalidated {
		quoted := strconv.QuoteToASCII(text)
		return quoted[1 : len(quoted)-1], nil
	}
	return "", &Rejected{Field: field, Value: text, Detail: "holds a control character (such as a newline), which an INI line cannot hold"}
}

// Rejected is raised by a template's invalid or iniValue: the input passed the schema, but
// the provider cannot render it. Field is the path the template names.
type Rejected struct {
	Field  string
	Value  any
	Detail string
}

func (e *Rejected) Error() string { return e.Field + ": " + e.Detail }
