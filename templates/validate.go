package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates/engine"
)

// ValidationError says an Infrastructure cannot be rendered as it is: the user has to
// change it, so it is never worth retrying.
type ValidationError struct {
	Type string
	// Object names what is invalid in messages: "infrastructure" when empty.
	Object string
	Errors field.ErrorList
}

func (e *ValidationError) Error() string {
	object := e.Object
	if object == "" {
		object = "infrastructure"
	}
	return fmt.Sprintf("invalid %s %s: %s", e.Type, object, e.Errors.ToAggregate().Error())
}

// Codes classifies the error for status.lastError.codes.
func (e *ValidationError) Codes() []extensionsv1alpha1.ErrorCode {
	return []extensionsv1alpha1.ErrorCode{extensionsv1alpha1.ErrorConfigurationProblem}
}

// decodeCluster is engine.DecodeCluster, failing with the ValidationError that names the
// object that is not one.
func decodeCluster(providerType string, c *extensionsv1alpha1.Cluster) (map[string]any, error) {
	cluster, invalid := engine.DecodeCluster(c)
	if invalid != nil {
		return nil, &ValidationError{Type: providerType, Errors: field.ErrorList{invalid}}
	}
	return cluster, nil
}

var printer = message.NewPrinter(language.English)

// schemaErrors turns the schema library's error tree into one field error per failed leaf
// of the providerConfig document.
func schemaErrors(err error, document any) field.ErrorList {
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return field.ErrorList{field.InternalError(field.NewPath("providerConfig"), err)}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		for _, fe := range leafErrors(e, document) {
			if key := fe.Error(); !seen[key] {
				seen[key] = true
				errs = append(errs, fe)
			}
		}
	}
	walk(verr)
	return errs
}

func leafErrors(e *jsonschema.ValidationError, document any) field.ErrorList {
	path := field.NewPath("providerConfig")
	value := document
	for _, tok := range e.InstanceLocation {
		if i, err := strconv.Atoi(tok); err == nil {
			path = path.Index(i)
			if list, ok := value.([]any); ok && i < len(list) {
				value = list[i]
				continue
			}
		} else {
			path = path.Child(tok)
			if object, ok := value.(map[string]any); ok {
				value = object[tok]
				continue
			}
		}
		value = nil
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var errs field.ErrorList
		for _, missing := range k.Missing {
			errs = append(errs, field.Required(path.Child(missing), ""))
		}
		return errs
	case *kind.AdditionalProperties:
		var errs field.ErrorList
		for _, extra := range k.Properties {
			errs = append(errs, field.Forbidden(path.Child(extra), "unknown field"))
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(path, shownValue(value), e.ErrorKind.LocalizedString(printer))}
	}
}

// shownValue is what an error message quotes of a wrong value: a string, number or bool
// as given; of an object or a list nothing, which the message describes instead.
func shownValue(v any) any {
	switch v := v.(type) {
	case string, bool, float64, json.Number:
		return v
	default:
		return field.OmitValueType{}
	}
}

// fieldPath is a parsed manifest path: a root and segments, where "[*]" means every element.
type fieldPath struct {
	root     string
	segments []string // a name, or "[*]"
}

var roots = map[string]*field.Path{
	"providerConfig": field.NewPath("providerConfig"),
	"shoot":          field.NewPath("cluster", "shoot"),
	"seed":           field.NewPath("cluster", "seed"),
	"cloudProfile":   field.NewPath("cluster", "cloudProfile"),
}

func parseFieldPath(s string) (fieldPath, error) {
	var fp fieldPath
	for i, part := range strings.Split(s, ".") {
		name, all := strings.CutSuffix(part, "[*]")
		if name == "" || strings.ContainsAny(name, "[]") {
			return fp, fmt.Errorf("%q is not a field path such as providerConfig.networks.zones[*].workers", s)
		}
		if i == 0 {
			if _, ok := roots[name]; !ok {
				return fp, fmt.Errorf("%q: the root must be one of providerConfig, shoot, seed, cloudProfile", s)
			}
			fp.root = name
		} else {
			fp.segments = append(fp.segments, name)
		}
		if all {
			fp.segments = append(fp.segments, "[*]")
		}
	}
	return fp, nil
}

// stringField is one string found at a concrete path.
type stringField struct {
	path  *field.Path
	value string
}

// lookup returns the strings at a path; absent fields and other types yield nothing.
func lookup(data map[string]any, s string) []stringField {
	fp, err := parseFieldPath(s)
	if err != nil {
		return nil // the manifest was checked when it loaded
	}
	var found []stringField
	var walk func(v any, path *field.Path, rest []string)
	walk = func(v any, path *field.Path, rest []string) {
		if len(rest) == 0 {
			if str, ok := v.(string); ok {
				found = append(found, stringField{path, str})
			}
			return
		}
		if rest[0] == "[*]" {
			list, _ := v.([]any)
			for i, e := range list {
				walk(e, path.Index(i), rest[1:])
			}
			return
		}
		if obj, ok := v.(map[string]any); ok {
			if child, ok := obj[rest[0]]; ok {
				walk(child, path.Child(rest[0]), rest[1:])
			}
		}
	}
	walk(data[fp.root], roots[fp.root], fp.segments)
	return found
}

type cidrField struct {
	stringField
	prefix netip.Prefix
}

func (c cidrField) describe() string { return fmt.Sprintf("%s (%s)", c.path, c.value) }

// check applies the network rules every provider needs.
func (n NetworkChecks) check(data map[string]any) field.ErrorList {
	var errs field.ErrorList
	parsed := map[string]*cidrField{} // by concrete path; nil when invalid
	cidrs := func(paths ...string) []cidrField {
		var out []cidrField
		for _, p := range paths {
			for _, f := range lookup(data, p) {
				key := f.path.String()
				c, seen := parsed[key]
				if !seen {
					c = parseCIDR(f, &errs)
					parsed[key] = c
				}
				if c != nil {
					out = append(out, *c)
				}
			}
		}
		return out
	}
	cidrs(n.CIDRs...)
	containers := cidrs(n.Container)
	subnets := cidrs(n.Subnets...)
	nodes := cidrs(n.Nodes...)
	workers := cidrs(n.Workers...)

	// A subnet that is already wrong is left out of the overlap checks, so one mistake
	// yields one error.
	var placed []cidrField
	for _, s := range subnets {
		if len(containers) > 0 && !contains(containers[0].prefix, s.prefix) {
			errs = append(errs, field.Invalid(s.path, s.value, "must lie inside "+containers[0].describe()))
			continue
		}
		overlapping := false
		for _, earlier := range placed {
			if earlier.prefix.Overlaps(s.prefix) {
				errs = append(errs, field.Invalid(s.path, s.value, "overlaps "+earlier.describe()))
				overlapping = true
				break
			}
		}
		if !overlapping {
			placed = append(placed, s)
		}
	}
	if len(nodes) > 0 {
		for _, w := range workers {
			if !contains(nodes[0].prefix, w.prefix) {
				errs = append(errs, field.Invalid(w.path, w.value, "must lie inside the nodes CIDR "+nodes[0].describe()))
			}
		}
	}
	return errs
}

func parseCIDR(f stringField, errs *field.ErrorList) *cidrField {
	prefix, err := netip.ParsePrefix(f.value)
	if err != nil {
		*errs = append(*errs, field.Invalid(f.path, f.value, "must be a CIDR such as 10.250.0.0/16"))
		return nil
	}
	if masked := prefix.Masked(); masked != prefix {
		*errs = append(*errs, field.Invalid(f.path, f.value, fmt.Sprintf("must be canonical: host bits are set, did you mean %s?", masked)))
		return nil
	}
	return &cidrField{stringField: f, prefix: prefix}
}

// contains says whether inner lies entirely inside outer.
func contains(outer, inner netip.Prefix) bool {
	return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}
