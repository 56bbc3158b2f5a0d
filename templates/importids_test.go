package templates_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/templates"
)

// copyThird copies the test provider "third" into a directory, its provider.yaml and
// main.tf.tpl changed by the functions given.
func copyThird(t *testing.T, manifest, main func(string) string) string {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	third := filepath.Join("testdata", "providers", "third")
	for name, change := range map[string]func(string) string{"schema.json": nil, "main.tf.tpl": main, "provider.yaml": manifest} {
		data, err := os.ReadFile(filepath.Join(third, name))
		g.Expect(err).NotTo(HaveOccurred())
		if change != nil {
			data = []byte(change(string(data)))
		}
		g.Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
	}
	return dir
}

// A provider whose templates declare a resource type without an import ID is refused at
// load, naming the type; one whose ID template does not parse names the type too.
func TestEveryResourceTypeNeedsAnImportID(t *testing.T) {
	g := NewWithT(t)
	addResource := func(main string) string {
		return main + "\nresource \"kubectl_manifest\" \"extra\" {\n  yaml_body = \"\"\n}\n"
	}
	_, err := templates.NewRegistry(copyThird(t, nil, addResource))
	g.Expect(err).To(MatchError(And(ContainSubstring("importIDs"), ContainSubstring("resource type kubectl_manifest has no import ID"))))

	declare := func(ids string) func(string) string {
		return func(manifest string) string {
			return strings.Replace(manifest, "resources:", "importIDs:\n  kubectl_manifest: "+ids+"\nresources:\n  - kubectl_manifest", 1)
		}
	}
	_, err = templates.NewRegistry(copyThird(t, declare(`"{{.id"`), addResource))
	g.Expect(err).To(MatchError(ContainSubstring("importIDs.kubectl_manifest")))
	_, err = templates.NewRegistry(copyThird(t, declare(`""`), addResource))
	g.Expect(err).To(MatchError(ContainSubstring("importIDs.kubectl_manifest: must not be empty")))

	r, err := templates.NewRegistry(copyThird(t, declare(`"{{.api_version}}//{{.kind}}//{{.name}}{{with .namespace}}//{{.}}{{end}}"`), addResource))
	g.Expect(err).NotTo(HaveOccurred())
	p, err := r.Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	index, err := p.ImportIDs().Index([]byte(`{"version":4,"serial":3,"lineage":"l","resources":[
		{"mode":"managed","type":"kubectl_manifest","name":"extra","instances":[
			{"index_key":"a","attributes":{"api_version":"v1","kind":"Secret","name":"s","namespace":"ns","yaml_body":"secret: data"}},
			{"index_key":1,"attributes":{"api_version":"v1","kind":"Namespace","name":"ns","namespace":null}}]},
		{"mode":"managed","type":"terraform_data","name":"t","instances":[{"attributes":{"id":"x"}}]},
		{"mode":"data","type":"kubectl_manifest","name":"read","instances":[{"attributes":{}}]}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.Serial).To(BeEquivalentTo(3))
	g.Expect(index.IDs).To(Equal(map[string]string{
		`kubectl_manifest.extra["a"]`: "v1//Secret//s//ns",
		`kubectl_manifest.extra[1]`:   "v1//Namespace//ns",
	}))
	g.Expect(index.Unimportable).To(ConsistOf("terraform_data.t"))
}

// The embedded providers declare an import ID for every resource type they use.
func TestEmbeddedProvidersDeclareImportIDs(t *testing.T) {
	g := NewWithT(t)
	r, err := templates.NewRegistry()
	g.Expect(err).NotTo(HaveOccurred())
	aws, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	index, err := aws.ImportIDs().Index([]byte(`{"version":4,"serial":1,"lineage":"l","resources":[
		{"mode":"managed","type":"aws_security_group_rule","name":"nodes_tcp","instances":[{"attributes":{
			"security_group_id":"sg-1","type":"ingress","protocol":"tcp","from_port":30000,"to_port":32767,"self":false,"cidr_blocks":["0.0.0.0/0"],"source_security_group_id":null}}]},
		{"mode":"managed","type":"aws_route","name":"public_default","instances":[{"attributes":{"route_table_id":"rtb-1","destination_cidr_block":"0.0.0.0/0"}}]},
		{"mode":"managed","type":"aws_vpc","name":"vpc","instances":[{"attributes":{"id":"vpc-1"}}]}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.IDs).To(Equal(map[string]string{
		"aws_security_group_rule.nodes_tcp": "sg-1_ingress_tcp_30000_32767_0.0.0.0/0",
		"aws_route.public_default":          "rtb-1_0.0.0.0/0",
		"aws_vpc.vpc":                       "vpc-1",
	}))
}
