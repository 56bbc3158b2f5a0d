package imports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// A state is read in place: encoding/json checks it is one complete document, nested
// no deeper than it decodes, and gjson then walks to the few values an index reads,
// skipping everything else without decoding it. Decoding the whole state instead costs
// about 45 times its size for a state of many small objects.

// ObjectIDs are the IDs (the id attribute) of the current objects of the managed resource
// instances a state holds, by address: the remote object each is bound to. An instance
// without an id, and an object a replace left deposed, are not named.
func ObjectIDs(state []byte) (map[string]string, error) {
	ids := map[string]string{}
	if len(bytes.TrimSpace(state)) == 0 {
		return ids, nil
	}
	doc, err := parseState(state)
	if err != nil {
		return nil, err
	}
	err = doc.walkInstances(func(_ string, i instance) error {
		if i.deposed {
			return nil
		}
		if id := i.attributes.Get("id"); id.Type == gjson.String && id.Str != "" {
			ids[string(i.address)] = str(id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// stateDoc is the part of a state (format version 4) an index reads.
type stateDoc struct {
	serial    int64
	lineage   string
	resources gjson.Result
}

// resource is one entry of a state's resources, its instances still unread.
type resource struct {
	module, mode, typ, name string
	instances               gjson.Result
}

// instance is one instance of a resource: its address and its attributes, unread.
type instance struct {
	address    []byte
	attributes gjson.Result
	// deposed is an object a replace left beside the current one, under the same address.
	deposed bool
}

// parseState checks state and finds the fields an index reads. The fields are matched
// as encoding/json (and terraform) match them: a later duplicate wins, case folded.
func parseState(state []byte) (stateDoc, error) {
	var doc stateDoc
	var whole struct{}
	if err := json.Unmarshal(state, &whole); err != nil {
		return doc, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	err := members(gjson.Parse(inPlace(state)), "state", func(key string, v gjson.Result) (err error) {
		switch {
		case strings.EqualFold(key, "serial"):
			doc.serial, err = integer("serial", v)
		case strings.EqualFold(key, "lineage"):
			doc.lineage, err = text("lineage", v)
			doc.lineage = strings.Clone(doc.lineage)
		case strings.EqualFold(key, "resources"):
			doc.resources, err = v, expect("resources", v, '[')
		}
		return err
	})
	return doc, err
}

// inPlace is state as a string without copying it: a state may be as large as the
// controller's bound allows, and its copy would double what indexing it holds. Nothing
// read from it outlives the read but as a copy (addresses are built in a buffer of their
// own, IDs in a builder, the lineage cloned), and state is not changed while it is read.
func inPlace(state []byte) string {
	return unsafe.String(unsafe.SliceData(state), len(state))
}

// members calls f for each member of an object; null has none, anything else is invalid.
func members(v gjson.Result, field string, f func(key string, v gjson.Result) error) error {
	return each(v, field, '{', f)
}

// elements calls f for each element of an array; null has none, anything else is invalid.
func elements(v gjson.Result, field string, f func(v gjson.Result) error) error {
	return each(v, field, '[', func(_ string, v gjson.Result) error { return f(v) })
}

func each(v gjson.Result, field string, kind byte, f func(key string, v gjson.Result) error) error {
	if err := expect(field, v, kind); err != nil || v.Type == gjson.Null {
		return err
	}
	var err error
	v.ForEach(func(key, value gjson.Result) bool {
		err = f(key.Str, value)
		return err == nil
	})
	return err
}

// expect checks that v is null or an object ('{') or array ('[').
func expect(field string, v gjson.Result, kind byte) error {
	if v.Type == gjson.Null || v.Type == gjson.JSON && v.Raw[0] == kind {
		return nil
	}
	what := map[byte]string{'{': "an object", '[': "an array"}[kind]
	return fmt.Errorf("%w: %s must be %s", ErrInvalid, field, what)
}

// text is a string field; null is empty.
func text(field string, v gjson.Result) (string, error) {
	switch v.Type {
	case gjson.String:
		return str(v), nil
	case gjson.Null:
		return "", nil
	}
	return "", fmt.Errorf("%w: %s must be a string", ErrInvalid, field)
}

// integer is an int64 field; null is 0.
func integer(field string, v gjson.Result) (int64, error) {
	switch v.Type {
	case gjson.Number:
		if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
			return n, nil
		}
	case gjson.Null:
		return 0, nil
	}
	return 0, fmt.Errorf("%w: %s must be an integer", ErrInvalid, field)
}

// walkInstances calls f for every instance of a managed resource, in the order of the
// state. Every resource is checked, as a typed decode of the state would.
func (doc stateDoc) walkInstances(f func(typ string, i instance) error) error {
	var address []byte
	return elements(doc.resources, "resources", func(v gjson.Result) error {
		r, err := readResource(v)
		if err != nil {
			return err
		}
		return elements(r.instances, "resources.instances", func(v gjson.Result) error {
			i, err := readInstance(v, r, address[:0])
			if err != nil || r.mode != "managed" {
				return err
			}
			address = i.address
			return f(r.typ, i)
		})
	})
}

func readResource(v gjson.Result) (resource, error) {
	var r resource
	err := members(v, "resources[]", func(key string, v gjson.Result) (err error) {
		switch {
		case strings.EqualFold(key, "module"):
			r.module, err = text("resources.module", v)
		case strings.EqualFold(key, "mode"):
			r.mode, err = text("resources.mode", v)
		case strings.EqualFold(key, "type"):
			r.typ, err = text("resources.type", v)
		case strings.EqualFold(key, "name"):
			r.name, err = text("resources.name", v)
		case strings.EqualFold(key, "instances"):
			r.instances, err = v, expect("resources.instances", v, '[')
		}
		return err
	})
	return r, err
}

// readInstance reads an instance's key and attributes, and appends its address to buf.
func readInstance(v gjson.Result, r resource, buf []byte) (instance, error) {
	var key, attributes gjson.Result
	deposed := false
	err := members(v, "resources.instances[]", func(name string, v gjson.Result) error {
		switch {
		case strings.EqualFold(name, "deposed"):
			deposed = v.Type == gjson.String && v.Str != ""
		case strings.EqualFold(name, "index_key"):
			if v.Type == gjson.JSON {
				return fmt.Errorf("%w: resources.instances.index_key must be a string or a number", ErrInvalid)
			}
			key = v
		case strings.EqualFold(name, "attributes"):
			attributes = v
			return expect("resources.instances.attributes", v, '{')
		}
		return nil
	})
	return instance{address: appendAddress(buf, r, key), attributes: attributes, deposed: deposed}, err
}

// appendAddress appends the address of an instance as terraform writes it.
func appendAddress(b []byte, r resource, key gjson.Result) []byte {
	if r.module != "" {
		b = append(append(b, r.module...), '.')
	}
	b = append(append(append(b, r.typ...), '.'), r.name...)
	switch key.Type {
	case gjson.String:
		return append(strconv.AppendQuote(append(b, '['), str(key)), ']')
	case gjson.Number, gjson.True, gjson.False:
		return append(append(append(b, '['), key.Raw...), ']')
	}
	return b
}

// str is a JSON string as encoding/json decodes it: each byte that is not UTF-8 is
// replaced by U+FFFD, where gjson keeps it.
func str(v gjson.Result) string {
	if utf8.ValidString(v.Str) {
		return v.Str
	}
	var b strings.Builder
	for i := 0; i < len(v.Str); {
		r, size := utf8.DecodeRuneInString(v.Str[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}
