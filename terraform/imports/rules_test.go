package imports

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// An index decodes only the attributes its templates name: a template that reads the
// attributes as a whole, which could read any of them, is refused naming its type.
func TestATemplateReadingTheAttributesAsAWholeIsRefused(t *testing.T) {
	for _, text := range []string{
		`{{.}}`,
		`{{index . "id"}}`,
		`{{$}}`,
		`{{range $k, $v := .}}{{$v}}{{end}}`,
		`{{with .id}}{{.}}{{else}}{{.}}{{end}}`,
		`{{range .ids}}{{$}}{{end}}`,
		`{{define "all"}}{{.}}{{end}}{{template "all" .id}}{{template "all" .}}`,
		`{{define "id"}}{{index . "id"}}{{end}}{{template "id" .}}`,
	} {
		g := NewWithT(t)
		_, err := ParseIDs(map[string]string{"aws_vpc": text})
		g.Expect(err).To(MatchError(And(ContainSubstring("importIDs.aws_vpc: "), ContainSubstring("reads the attributes as a whole"))), text)
	}
	for text, names := range map[string][]string{
		`{{.id}}`: {"id"},
		`{{.route_table_id}}_{{.destination_cidr_block}}`:                      {"destination_cidr_block", "route_table_id"},
		`{{with .namespace}}//{{.}}{{end}}{{range .cidr_blocks}}_{{.}}{{end}}`: {"cidr_blocks", "namespace"},
		`{{range $i, $v := .ports}}{{$.id}}{{$v}}{{end}}`:                      {"id", "ports"},
		`{{.tags.Name}}{{printf "%s" .arn}}`:                                   {"arn", "tags"},
		`{{define "suffix"}}/{{.}}{{end}}{{.id}}{{template "suffix" .name}}`:   {"id", "name"},
		`{{define "id"}}{{.id}}{{end}}{{template "id" .}}`:                     {"id"},
	} {
		g := NewWithT(t)
		ids, err := ParseIDs(map[string]string{"aws_vpc": text})
		g.Expect(err).NotTo(HaveOccurred(), text)
		g.Expect(ids.templates["aws_vpc"].names).To(Equal(names), text)
	}
}

// A state that is not one complete JSON document, nests deeper than encoding/json
// decodes, or holds a field of another type than terraform writes, is invalid.
func TestAnInvalidStateIsRefusedNamingWhatIsWrong(t *testing.T) {
	ids, err := ParseIDs(map[string]string{"aws_vpc": "{{.id}}"})
	if err != nil {
		t.Fatal(err)
	}
	deep := `{"resources":[{"mode":"managed","type":"aws_vpc","name":"v","instances":[{"attributes":{"id":"v","t":` +
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}]}]}`
	for state, message := range map[string]string{
		`{"resources":[]} {}`:                  "after top-level value",
		`{"resources":[`:                       "unexpected end of JSON input",
		`[]`:                                   "cannot unmarshal array",
		deep:                                   "exceeded max depth",
		`{"serial":"3"}`:                       "serial must be an integer",
		`{"serial":1.5}`:                       "serial must be an integer",
		`{"lineage":3}`:                        "lineage must be a string",
		`{"resources":{}}`:                     "resources must be an array",
		`{"resources":[3]}`:                    "resources[] must be an object",
		`{"resources":[{"mode":["managed"]}]}`: "resources.mode must be a string",
		`{"resources":[{"instances":{}}]}`:     "resources.instances must be an array",
		`{"resources":[{"instances":[[]]}]}`:   "resources.instances[] must be an object",
		`{"resources":[{"mode":"data","instances":[{"attributes":[]}]}]}`: "resources.instances.attributes must be an object",
		`{"resources":[{"instances":[{"index_key":{}}]}]}`:                "index_key must be a string or a number",
	} {
		g := NewWithT(t)
		_, err := ids.Index([]byte(state))
		g.Expect(err).To(And(MatchError(ErrInvalid), MatchError(ContainSubstring(message))), state)
		_, err = Addresses([]byte(state))
		g.Expect(err).To(And(MatchError(ErrInvalid), MatchError(ContainSubstring(message))), state)
	}
}

// An import ID is at most maxIDLength bytes: a template ranging over a long list makes
// no longer one, and the instance is indexed as unimportable.
func TestAnImportIDLongerThanAnyTerraformTakesIsNone(t *testing.T) {
	g := NewWithT(t)
	ids, err := ParseIDs(map[string]string{
		"aws_security_group_rule": "{{.id}}{{range .cidr_blocks}}_{{.}}{{end}}",
		"piped":                   `{{.id}}{{range $v := .cidr_blocks}}_{{$v | printf "%s"}}{{end}}`,
	})
	g.Expect(err).NotTo(HaveOccurred())
	state := func(typ string, blocks int) []byte {
		cidrs := strings.TrimSuffix(strings.Repeat(`"10.0.0.0/16",`, blocks), ",")
		return []byte(`{"resources":[{"mode":"managed","type":"` + typ + `","name":"r","instances":[{"attributes":{"id":"sg","cidr_blocks":[` + cidrs + `]}}]}]}`)
	}
	for _, typ := range []string{"aws_security_group_rule", "piped"} {
		index, err := ids.Index(state(typ, maxIDLength/len("_10.0.0.0/16")))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(index.IDs).To(HaveKeyWithValue(typ+".r", HavePrefix("sg_10.0.0.0/16_")), typ)
		index, err = ids.Index(state(typ, maxIDLength/len("_10.0.0.0/16")+1))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(index.IDs).To(BeEmpty(), typ)
		g.Expect(index.Unimportable).To(ConsistOf(typ+".r"), typ)
	}
}

// The object IDs of a state are the id attributes of its current objects, by address: a
// deposed object (a replace that has not destroyed it yet, written after the current one
// as terraform does), an instance without an id and a data source are not named.
func TestObjectIDsNameTheCurrentObjectOfEachAddress(t *testing.T) {
	g := NewWithT(t)
	state := []byte(`{"version":4,"serial":3,"lineage":"l","resources":[
		{"mode":"managed","type":"terraform_data","name":"network","instances":[
			{"attributes":{"id":"new"}},
			{"deposed":"00000001","attributes":{"id":"old"}}]},
		{"mode":"managed","type":"terraform_data","name":"zone","instances":[
			{"index_key":0,"attributes":{"id":"z0"}},
			{"index_key":1,"attributes":{"input":"no id"}}]},
		{"module":"module.m","mode":"managed","type":"local_file","name":"f","instances":[
			{"index_key":"a","attributes":{"id":"f-a"}}]},
		{"mode":"data","type":"terraform_data","name":"read","instances":[{"attributes":{"id":"d"}}]}]}`)
	ids, err := ObjectIDs(state)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(Equal(map[string]string{
		"terraform_data.network":     "new",
		"terraform_data.zone[0]":     "z0",
		`module.m.local_file.f["a"]`: "f-a",
	}))
	ids, err = ObjectIDs(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(BeEmpty())
	_, err = ObjectIDs([]byte(`{"resources":{}}`))
	g.Expect(err).To(MatchError(ErrInvalid))
}
