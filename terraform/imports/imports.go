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
	"strconv"
	"strings"
	"text/template"
)

const (
	// IDsKey is the key of the configuration ConfigMap that carries a provider's
	// import ID templates (IDs.Declared, JSON) to the run that indexes its states.
	// It is no terraform file: the run takes it out before terraform sees the files.
	IDsKey = "terraseed-import-ids.json"
	// File is the terraform file of the import blocks a run applies: the resources
	// a lost state held, and those an operator adopts.
	File = "terraseed-imports.tf"
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
	templates map[string]*template.Template
}

// ParseIDs parses the import ID templates by resource type; the value NotImportable
// marks a type terraform cannot import. The error names the type.
func ParseIDs(declared map[string]string) (*IDs, error) {
	ids := &IDs{declared: maps.Clone(declared), templates: map[string]*template.Template{}}
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
		ids.templates[typ] = tmpl
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

// stateResources is the part of a state (format version 4) an index reads.
type stateResources struct {
	Serial    int64  `json:"serial"`
	Lineage   string `json:"lineage"`
	Resources []struct {
		Module    string `json:"module"`
		Mode      string `json:"mode"`
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			IndexKey   any            `json:"index_key"`
			Attributes map[string]any `json:"attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

func parseResources(state []byte) (*stateResources, error) {
	var s stateResources
	dec := json.NewDecoder(bytes.NewReader(state))
	// Numbers stay as written: an ID holding a port reads 443, never 443.0 or 4.43e+02.
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &s, nil
}

// instanceAddress is the address of one resource instance as terraform writes it.
func instanceAddress(module, typ, name string, key any) string {
	var b strings.Builder
	if module != "" {
		b.WriteString(module)
		b.WriteByte('.')
	}
	b.WriteString(typ)
	b.WriteByte('.')
	b.WriteString(name)
	switch k := key.(type) {
	case nil:
	case string:
		b.WriteString("[" + strconv.Quote(k) + "]")
	default:
		fmt.Fprintf(&b, "[%v]", k)
	}
	return b.String()
}

// Index indexes the managed resources of state. A resource whose type has no template, or
// whose template does not resolve on its attributes, is indexed as unimportable.
func (ids *IDs) Index(state []byte) (*Index, error) {
	s, err := parseResources(state)
	if err != nil {
		return nil, err
	}
	index := &Index{Serial: s.Serial, Lineage: s.Lineage, IDs: map[string]string{}}
	for _, r := range s.Resources {
		if r.Mode != "managed" {
			continue
		}
		tmpl := ids.templates[r.Type]
		for _, instance := range r.Instances {
			address := instanceAddress(r.Module, r.Type, r.Name, instance.IndexKey)
			id, ok := "", false
			if tmpl != nil {
				id, ok = importID(tmpl, instance.Attributes)
			}
			if ok {
				index.IDs[address] = id
			} else {
				index.Unimportable = append(index.Unimportable, address)
			}
		}
	}
	slices.Sort(index.Unimportable)
	return index, nil
}

// importID executes tmpl on attrs; an ID missing a value is no ID.
func importID(tmpl *template.Template, attrs map[string]any) (string, bool) {
	var b strings.Builder
	if err := tmpl.Execute(&b, attrs); err != nil {
		return "", false
	}
	id := b.String()
	return id, id != "" && !strings.Contains(id, "<no value>")
}

// Addresses lists the managed resource instances a state holds; none for an empty state.
func Addresses(state []byte) (map[string]bool, error) {
	addresses := map[string]bool{}
	if len(bytes.TrimSpace(state)) == 0 {
		return addresses, nil
	}
	s, err := parseResources(state)
	if err != nil {
		return nil, err
	}
	for _, r := range s.Resources {
		if r.Mode != "managed" {
			continue
		}
		for _, instance := range r.Instances {
			addresses[instanceAddress(r.Module, r.Type, r.Name, instance.IndexKey)] = true
		}
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
