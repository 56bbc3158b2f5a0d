package templates

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/terraseed/terraseed/terraform/imports"
)

// resourceBlock finds the managed resource types a template declares.
var resourceBlock = regexp.MustCompile(`(?m)^\s*resource\s+"([A-Za-z0-9_-]+)"`)

// checkImportIDs parses the provider's import ID templates and names the first managed
// resource type, declared in resources or in a template, that has none, and a template
// for a type the provider does not declare.
func checkImportIDs(m Manifest, tfTemplates map[string]string) (*imports.IDs, error) {
	ids, err := imports.ParseIDs(m.ImportIDs)
	if err != nil {
		return nil, err
	}
	types := map[string]bool{}
	for _, t := range m.Resources {
		if !strings.HasPrefix(t, "data.") {
			types[t] = true
		}
	}
	for _, text := range tfTemplates {
		for _, match := range resourceBlock.FindAllStringSubmatch(text, -1) {
			types[match[1]] = true
		}
	}
	for _, t := range slices.Sorted(maps.Keys(types)) {
		if !ids.Declares(t) {
			return nil, fmt.Errorf("importIDs: resource type %s has no import ID: declare the ID `terraform import` takes as a template over its state attributes (for most types %q), or %q when it cannot be imported",
				t, "{{.id}}", imports.NotImportable)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(m.ImportIDs)) {
		if len(m.Resources) > 0 && !slices.Contains(m.Resources, t) {
			return nil, fmt.Errorf("importIDs.%s: %q is not a resource type declared in resources", t, t)
		}
	}
	return ids, nil
}

// OwnedNamespaces says which namespace an object of a provider creates and owns, and
// how the namespace names its owner.
type OwnedNamespaces struct {
	// Variable is the tfvar of an object's configuration that names its namespace; a
	// configuration without it owns none.
	Variable string `json:"variable"`
	// Label is the namespace's label that names the UID of its owner.
	Label string `json:"label"`
	// Annotation is the namespace's annotation that names its owner's kind and key, which
	// an object restored in another seed (a new UID) keeps.
	Annotation string `json:"annotation"`
}

// OwnedNamespaces are the provider's, nil when its objects own no namespace.
func (p *Provider) OwnedNamespaces() *OwnedNamespaces { return p.Manifest.OwnedNamespaces }

// OwnedNamespaces are the provider's, for the kind.
func (k *KindProvider) OwnedNamespaces() *OwnedNamespaces { return k.provider.Manifest.OwnedNamespaces }

// ImportIDForms read the provider's import IDs back into their canonical form.
func (p *Provider) ImportIDForms() *imports.Forms { return p.idForms }

// ImportIDs are the provider's import ID templates.
func (p *Provider) ImportIDs() *imports.IDs { return p.importIDs }

// ImportIDsFile is the configuration file that carries the import ID templates to a
// run, which indexes every state it saves with them.
func (p *Provider) ImportIDsFile() string { return importIDsFile(p.importIDs) }

func importIDsFile(ids *imports.IDs) string {
	raw, _ := json.Marshal(ids.Declared())
	return string(raw)
}
