package imports

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Forms read an import ID back into the state attributes its type's template names, so
// that IDs the provider takes for the same resource compare as one: the kubectl provider
// takes v1//Namespace//x// and v1//Namespace//x for the same namespace. A form is a
// regular expression over the whole ID whose named groups are the template's attributes;
// the canonical ID is the template rendered on them.
type Forms struct {
	ids   *IDs
	forms map[string]*regexp.Regexp
}

// ParseForms parses the forms by resource type; each must name a type ids declares an
// import ID template for, and have a group for each attribute the template names. The
// error names the type.
func ParseForms(declared map[string]string, ids *IDs) (*Forms, error) {
	f := &Forms{ids: ids, forms: map[string]*regexp.Regexp{}}
	for _, typ := range slices.Sorted(maps.Keys(declared)) {
		tmpl := ids.templates[typ]
		if tmpl == nil {
			return nil, fmt.Errorf("importIDForms.%s: importIDs declares no template for the type", typ)
		}
		re, err := regexp.Compile(`^(?:` + declared[typ] + `)$`)
		if err != nil {
			return nil, fmt.Errorf("importIDForms.%s: %w", typ, err)
		}
		for _, name := range tmpl.names {
			if re.SubexpIndex(name) < 0 {
				return nil, fmt.Errorf("importIDForms.%s: no group (?P<%s>...) for the attribute %q the import ID names", typ, name, name)
			}
		}
		f.forms[typ] = re
	}
	return f, nil
}

// Canonical is the ID of typ as its template renders it; an ID of a type without a form
// is its own. An ID not of its type's form is an error that says the form.
func (f *Forms) Canonical(typ, id string) (string, error) {
	if f == nil || f.forms[typ] == nil {
		return id, nil
	}
	re := f.forms[typ]
	match := re.FindStringSubmatch(id)
	if match == nil {
		return "", fmt.Errorf("%q is not an import ID of %s, of the form %s", id, typ, strings.TrimSuffix(strings.TrimPrefix(re.String(), "^(?:"), ")$"))
	}
	attrs := map[string]any{}
	for i, name := range re.SubexpNames() {
		if name != "" {
			attrs[name] = match[i]
		}
	}
	var b limitedBuilder
	if err := f.ids.templates[typ].tmpl.Execute(&b, attrs); err != nil {
		return "", fmt.Errorf("the import ID of %s from %q: %w", typ, id, err)
	}
	return b.String(), nil
}
