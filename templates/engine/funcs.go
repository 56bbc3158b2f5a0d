package engine

import (
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/Masterminds/sprig/v3"
)

// Funcs are sprig's text functions without those that read the machine (environment
// variables hold credentials) or the network, plus invalid and iniValue, which refuse an
// input, and bastionMachine (BastionMachine); an unvalidated render lets invalid pass,
// iniValue escape and bastionMachine answer empty names instead. Each call
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
	funcs["bastionMachine"] = func(cloudProfile any) (map[string]any, error) {
		return bastionMachine(unvalidated, cloudProfile)
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

// bastionMachine is BastionMachine at the time of rendering; an unvalidated render gets
// empty names where it would fail.
func bastionMachine(unvalidated bool, cloudProfile any) (map[string]any, error) {
	machine, err := BastionMachine(cloudProfile, time.Now())
	if err != nil && unvalidated {
		return map[string]any{"machineType": "", "architecture": "", "image": "", "version": ""}, nil
	}
	return machine, err
}

// Rejected is raised by a template's invalid or iniValue: the input passed the schema, but
// the provider cannot render it. Field is the path the template names.
type Rejected struct {
	Field  string
	Value  any
	Detail string
}

func (e *Rejected) Error() string { return e.Field + ": " + e.Detail }
