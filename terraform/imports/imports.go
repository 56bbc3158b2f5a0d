package imports

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"
)

const (
	// IDsKey is the key of the configuration ConfigMap that carries a provider's
	// import ID templates (IDs.Declared, JSON) to the run that indexes its states.
	// It is no terraform file: the run takes it out before terraform sees the files.
	IDsKey = "terraseed-import-ids.json"
	// File is the terraform file of the import blocks of the resources an operator
	// adopts: each must exist.
	File = "terraseed-imports.tf"
	// RecoveredFile is the terraform file of the import blocks of the resources a lost
	// state's index names: a run drops the block of one that no longer exists, and the
	// configuration that declares it creates it again.
	RecoveredFile = "terraseed-recovered-imports.tf"
	// NotImportable declares a resource type terraform cannot import (a generated key):
	// indexed by address only, and named when it would have to be created again.
	NotImportable = "-"
	// indexCompressedPrefix starts an index too large to be kept as plain JSON.
	indexCompressedPrefix = "gzip:"
	// indexPlainLimit is the largest index kept as plain JSON: the API server bounds all
	// annotations of an object to 256 KiB together.
	indexPlainLimit = 64 << 10
	// builtinNotImportable is terraform's own terraform_data, which imports an ID only and
	// would be replaced right after: it is never imported.
	builtinNotImportable = "terraform_data"
)

// ErrInvalid is returned for bytes that are not a complete terraform state.
var ErrInvalid = errors.New("not a complete terraform state")

// Index says how to find every managed resource of a state again: its address and the ID
// `terraform import` takes for it. It holds IDs only, never attribute values, so that it
// may sit where the state cannot (the Infrastructure's status).
type Index struct {
	Serial  int64  `json:"serial"`
	Lineage string `json:"lineage"`
	// IDs maps resource instance addresses to import IDs.
	IDs map[string]string `json:"ids,omitempty"`
	// Unimportable are the addresses of resources that no import can bring back.
	Unimportable []string `json:"unimportable,omitempty"`
}

// Empty says whether the index knows no resource.
func (i *Index) Empty() bool { return i == nil || len(i.IDs)+len(i.Unimportable) == 0 }

// Newer says whether i describes a later state than other (nil is older than anything).
func (i *Index) Newer(other *Index) bool {
	return i != nil && (other == nil || i.Serial > other.Serial)
}

// IDs are a provider's import ID templates, one per resource type, over the state
// attributes of a resource instance (text/template: `{{.id}}`).
type IDs struct {
	declared  map[string]string
	templates map[string]*idTemplate
}

// ParseIDs parses the import ID templates by resource type; the value NotImportable
// marks a type terraform cannot import. The error names the type.
func ParseIDs(declared map[string]string) (*IDs, error) {
	ids := &IDs{declared: maps.Clone(declared), templates: map[string]*idTemplate{}}
	for _, typ := range slices.Sorted(maps.Keys(declared)) {
		text := declared[typ]
		if strings.TrimSpace(text) == "" {
			return nil, fmt.Errorf("importIDs.%s: must not be empty: a template over the state attributes, or %q for a type terraform cannot import", typ, NotImportable)
		}
		if text == NotImportable {
			continue
		}
		tmpl, err := template.New(typ).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("importIDs.%s: %w", typ, err)
		}
		if ids.templates[typ], err = newIDTemplate(tmpl); err != nil {
			return nil, fmt.Errorf("importIDs.%s: %w", typ, err)
		}
	}
	return ids, nil
}

// Declared returns the templates as declared, by resource type.
func (ids *IDs) Declared() map[string]string { return maps.Clone(ids.declared) }

// Declares says whether the type has an import ID declared, or cannot have one.
func (ids *IDs) Declares(typ string) bool {
	_, ok := ids.declared[typ]
	return ok || typ == builtinNotImportable
}

// Index indexes the managed resources of state. A resource whose type has no template, or
// whose template does not resolve on its attributes (one of those it names is missing),
// is indexed as unimportable, once. It reads of each instance its address and the
// attributes its type's template names, so that it costs about the state's size.
func (ids *IDs) Index(state []byte) (*Index, error) {
	doc, err := parseState(state)
	if err != nil {
		return nil, err
	}
	index := &Index{Serial: doc.serial, Lineage: doc.lineage, IDs: map[string]string{}}
	unimportable := map[string]bool{}
	var found values
	attrs := map[string]any{}
	err = doc.walkInstances(func(typ string, i instance) error {
		tmpl := ids.templates[typ]
		if tmpl != nil && found.read(tmpl.names, i.attributes) {
			if id, ok := importID(tmpl, &found, attrs); ok {
				index.IDs[string(i.address)] = id
				return nil
			}
		}
		// Looked up first: a lookup copies no address, an assignment would each time.
		if !unimportable[string(i.address)] {
			unimportable[string(i.address)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(unimportable) > 0 {
		index.Unimportable = make([]string, 0, len(unimportable))
		for address := range unimportable {
			index.Unimportable = append(index.Unimportable, address)
		}
		slices.Sort(index.Unimportable)
	}
	return index, nil
}

// importID renders the template on the attributes found; an ID missing a value is no
// ID. attrs is the map a template beyond the simple ones runs on, reused.
func importID(t *idTemplate, found *values, attrs map[string]any) (string, bool) {
	var b limitedBuilder
	var err error
	if t.simple {
		err = (&renderer{values: found}).renderTo(t.tmpl.Tree.Root, &b)
	} else {
		clear(attrs)
		for i, name := range found.names {
			attrs[name] = decoded(found.found[i])
		}
		err = t.tmpl.Execute(&b, attrs)
	}
	if err != nil {
		return "", false
	}
	id := b.String()
	return id, id != "" && !strings.Contains(id, noValue)
}

// Addresses lists the managed resource instances a state holds; none for an empty state.
func Addresses(state []byte) (map[string]bool, error) {
	addresses := map[string]bool{}
	if len(bytes.TrimSpace(state)) == 0 {
		return addresses, nil
	}
	doc, err := parseState(state)
	if err != nil {
		return nil, err
	}
	err = doc.walkInstances(func(_ string, i instance) error {
		// Looked up first: a lookup copies no address, an assignment would each time.
		if !addresses[string(i.address)] {
			addresses[string(i.address)] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return addresses, nil
}

// Encode is the index as kept in an annotation: compact JSON, gzipped and base64
// encoded behind a prefix when large. Nothing decodes it: an annotation is written by
// whoever may update its object, and a recovery trusts no index but its own.
func Encode(index *Index) (string, error) {
	raw, err := json.Marshal(index)
	if err != nil {
		return "", err
	}
	if len(raw) <= indexPlainLimit {
		return string(raw), nil
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(raw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return indexCompressedPrefix + base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
