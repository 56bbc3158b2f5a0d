package imports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"

	. "github.com/onsi/gomega"
)

// referenceIndex indexes a state as a decode of the whole of it does: every attribute of
// every instance into map[string]any, for text/template to execute on.
func referenceIndex(declared map[string]string, state []byte) (*Index, error) {
	var s struct {
		Serial    int64  `json:"serial"`
		Lineage   string `json:"lineage"`
		Resources []struct {
			Module, Mode, Type, Name string
			Instances                []struct {
				IndexKey   any            `json:"index_key"`
				Attributes map[string]any `json:"attributes"`
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(state))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	index := &Index{Serial: s.Serial, Lineage: s.Lineage, IDs: map[string]string{}}
	for _, r := range s.Resources {
		if r.Mode != "managed" {
			continue
		}
		for _, i := range r.Instances {
			address := r.Type + "." + r.Name
			if r.Module != "" {
				address = r.Module + "." + address
			}
			switch k := i.IndexKey.(type) {
			case string:
				address += "[" + strconv.Quote(k) + "]"
			case nil:
			default:
				address += fmt.Sprintf("[%v]", k)
			}
			for name, v := range i.Attributes {
				i.Attributes[name] = notRead(v, false)
			}
			var b strings.Builder
			text, ok := declared[r.Type]
			if ok && text != NotImportable {
				err := template.Must(template.New(r.Type).Option("missingkey=error").Parse(text)).Execute(&b, i.Attributes)
				ok = err == nil && b.Len() > 0 && !strings.Contains(b.String(), "<no value>")
			}
			if ok && text != NotImportable {
				index.IDs[address] = b.String()
			} else if !slices.Contains(index.Unimportable, address) {
				index.Unimportable = append(index.Unimportable, address)
			}
		}
	}
	slices.Sort(index.Unimportable)
	return index, nil
}

// referenceUnread is what an index does not read of an attribute: an object, or a list within a list.
// It is false when empty, prints as no value and cannot be ranged over.
type referenceUnread struct{}

func (*referenceUnread) String() string { return "<no value>" }

// notRead replaces in an attribute's value what an index does not read.
func notRead(v any, element bool) any {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			return (*referenceUnread)(nil)
		}
		return &referenceUnread{}
	case []any:
		if element {
			if len(v) == 0 {
				return (*referenceUnread)(nil)
			}
			return &referenceUnread{}
		}
		for i := range v {
			v[i] = notRead(v[i], true)
		}
	}
	return v
}

// referenceIDs are the import IDs of the embedded providers, and templates beyond what
// an index renders itself, which text/template runs.
var referenceIDs = map[string]string{
	"aws_vpc":                 "{{.id}}",
	"aws_route":               "{{.route_table_id}}_{{.destination_cidr_block}}",
	"aws_security_group_rule": "{{.security_group_id}}_{{.type}}_{{.protocol}}_{{.from_port}}_{{.to_port}}{{if .self}}_self{{end}}{{with .source_security_group_id}}_{{.}}{{end}}{{range .cidr_blocks}}_{{.}}{{end}}",
	"kubectl_manifest":        "{{.api_version}}//{{.kind}}//{{.name}}{{with .namespace}}//{{.}}{{end}}",
	"listed":                  "{{.id}}:{{.cidr_blocks}}{{range .ports}}{{if .}}+{{.}}{{else}}-{{end}}{{else}}none{{end}}",
	"piped":                   `{{.id | printf "%s"}}{{if eq .type "ingress"}}_in{{end}}{{range $v := .cidr_blocks}}_{{$v}}{{end}}{{$.name}}`,
	"defined":                 `{{define "suffix"}}/{{.}}{{end}}{{.id}}{{template "suffix" .name}}`,
	"key_pair":                NotImportable,
}

// A value of an attribute, as a state holds them.
func randomValue(r *rand.Rand, depth int) string {
	scalars := []string{`"a"`, `""`, `"sg-0123"`, `"10.0.0.0/16"`, `"\u00e9\n\"q\""`, `0`, `443`, `-1.5`, `1e3`, `true`, `false`, `null`}
	if depth > 1 || r.IntN(3) > 0 {
		return scalars[r.IntN(len(scalars))]
	}
	var elements []string
	for range r.IntN(4) {
		elements = append(elements, randomValue(r, depth+1))
	}
	return "[" + strings.Join(elements, ", ") + "]"
}

// randomState is a state of the types the templates index, each attribute present or
// not, of any value.
func randomState(r *rand.Rand) []byte {
	types := []string{"aws_vpc", "aws_route", "aws_security_group_rule", "kubectl_manifest", "listed", "piped", "defined", "key_pair", "unknown"}
	attrs := []string{"id", "route_table_id", "destination_cidr_block", "security_group_id", "type", "protocol", "from_port", "to_port",
		"self", "source_security_group_id", "cidr_blocks", "api_version", "kind", "name", "namespace", "ports", "tags"}
	keys := []string{`"a"`, `"b\"c"`, `0`, `1`, `10`, `null`}
	var resources []string
	for n := range 1 + r.IntN(4) {
		var instances []string
		for range r.IntN(4) {
			var fields []string
			for _, a := range attrs {
				if r.IntN(8) > 0 {
					fields = append(fields, fmt.Sprintf("%q: %s", a, randomValue(r, 0)))
				}
			}
			instance := `{"schema_version":0,"attributes":{` + strings.Join(fields, ",") + `},"private":"eyJ9"`
			if r.IntN(2) == 0 {
				instance += `,"index_key":` + keys[r.IntN(len(keys))]
			}
			instances = append(instances, instance+"}")
		}
		module := []string{"", `"module":"module.m",`, `"module":"module.m[\"x\"]",`}[r.IntN(3)]
		mode := []string{"managed", "managed", "data"}[r.IntN(3)]
		resources = append(resources, fmt.Sprintf(`{%s"mode":%q,"type":%q,"name":"r%d","provider":"p","instances":[%s]}`,
			module, mode, types[r.IntN(len(types))], n%2, strings.Join(instances, ",")))
	}
	return []byte(fmt.Sprintf(`{"version":4,"terraform_version":"1.9.0","serial":%d,"lineage":"lin-%d","outputs":{"o":{"value":[1,{"a":2}],"type":"x"}},"resources":[%s],"check_results":null}`,
		r.IntN(100), r.IntN(100), strings.Join(resources, ",\n")))
}

// edgeStates are states terraform does not write, read as encoding/json reads them.
var edgeStates = []string{
	`null`,
	`{}`,
	`{"version":4,"serial":null,"lineage":null,"resources":null}`,
	`{"Serial":2,"LINEAGE":"l","Resources":[{"Mode":"managed","TYPE":"aws_vpc","Name":"v","Instances":[{"Index_Key":3,"Attributes":{"id":"vpc-1"}}]}]}`,
	`{"serial":1,"serial":2,"resources":[{"mode":"managed","type":"aws_vpc","name":"a","instances":[{"attributes":{"id":"x"}}]}],
	  "resources":[{"mode":"managed","type":"aws_vpc","name":"b","name":"c","instances":[{"attributes":{"id":"x","id":"y","ID":"z"}}]}]}`,
	`{"resources":[null,{"mode":"managed","type":"aws_vpc","name":"v","instances":[null,{"attributes":null},{"index_key":null,"attributes":{}}]}]}`,
	`{"resources":[{"mode":"managed","type":"aws_vpc","name":"v","instances":[{"index_key":true,"attributes":{"id":"\ud83d\ude00\u0000"}},{"index_key":-0.5e1,"attributes":{"id":"a\/b"}}]}]}`,
	`{"resources":[{"mode":"managed","type":"listed","name":"l","instances":[{"attributes":{"id":"i","cidr_blocks":[{"a":1},{}],"ports":[{},{"a":1}]}}]}]}`,
	`{"resources":[{"mode":"managed","type":"listed","name":"l","instances":[{"attributes":{"id":{"a":1},"cidr_blocks":{},"ports":{"a":1}}}]}]}`,
	"{\"resources\":[{\"mode\":\"managed\",\"type\":\"aws_vpc\",\"name\":\"v\xff\",\"instances\":[{\"index_key\":\"k\xe2\x82\",\"attributes\":{\"id\":\"a\xffb\xc0\"}}]}]}",
	`{"resources":[{"mode":"managed","type":"aws_vpc","name":"v","instances":[{"attributes":{"id":"\ud800x\udc00"}}]}]}`,
}

// An index reads of a state only the attributes its templates name, and finds what an
// index that decodes the whole state finds: the same addresses, import IDs, serial and
// lineage, for plain attributes, branches and ranges, and templates text/template runs.
func TestAnIndexFindsWhatADecodeOfTheWholeStateFinds(t *testing.T) {
	ids, err := ParseIDs(referenceIDs)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	importable := 0
	for n := range 3000 + len(edgeStates) {
		g := NewWithT(t)
		state := randomState(r)
		if n < len(edgeStates) {
			state = []byte(edgeStates[n])
		}
		want, err := referenceIndex(referenceIDs, state)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := ids.Index(state)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), "state %d:\n%s", n, state)
		addresses, err := Addresses(state)
		g.Expect(err).NotTo(HaveOccurred())
		indexed := map[string]bool{}
		for _, address := range want.Unimportable {
			indexed[address] = true
		}
		for address := range want.IDs {
			indexed[address] = true
		}
		g.Expect(addresses).To(Equal(indexed), "state %d:\n%s", n, state)
		importable += len(want.IDs)
	}
	g := NewWithT(t)
	g.Expect(importable).To(BeNumerically(">", 1000), "the states resolve many IDs")
}
