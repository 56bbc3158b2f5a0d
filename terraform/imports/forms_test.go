package imports_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/imports"
)

const (
	kubectlID   = "{{.api_version}}//{{.kind}}//{{.name}}{{with .namespace}}//{{.}}{{end}}"
	kubectlForm = `(?P<api_version>[^/]+(?:/[^/]+)?)//(?P<kind>[^/]+)//(?P<name>[^/]+)(?://(?P<namespace>[^/]*))?`
)

func kubectlForms(t *testing.T) *imports.Forms {
	t.Helper()
	ids, err := imports.ParseIDs(map[string]string{"kubectl_manifest": kubectlID, "aws_vpc": "{{.id}}"})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	forms, err := imports.ParseForms(map[string]string{"kubectl_manifest": kubectlForm}, ids)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return forms
}

// The IDs a provider takes for one resource have one canonical form: the one its import
// ID template renders, which is what the indexes hold.
func TestIDsOfOneResourceHaveOneCanonicalForm(t *testing.T) {
	g := NewWithT(t)
	forms := kubectlForms(t)
	for id, canonical := range map[string]string{
		"v1//Namespace//x//":                        "v1//Namespace//x",
		"v1//Namespace//x":                          "v1//Namespace//x",
		"networking.k8s.io/v1//NetworkPolicy//p//n": "networking.k8s.io/v1//NetworkPolicy//p//n",
	} {
		got, err := forms.Canonical("kubectl_manifest", id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(canonical), id)
	}
	got, err := forms.Canonical("aws_vpc", "vpc-0a1b")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("vpc-0a1b"), "a type without a form compares as it is")
}

func TestAnIDNotOfItsTypesFormIsRefusedWithTheForm(t *testing.T) {
	_, err := kubectlForms(t).Canonical("kubectl_manifest", "v1//Namespace")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`"v1//Namespace" is not an import ID of kubectl_manifest, of the form (?P<api_version>`)))
}

func TestAFormNeedsAGroupForEveryAttributeTheTemplateNames(t *testing.T) {
	g := NewWithT(t)
	ids, err := imports.ParseIDs(map[string]string{"kubectl_manifest": kubectlID})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = imports.ParseForms(map[string]string{"kubectl_manifest": `(?P<api_version>.+)//(?P<kind>.+)//(?P<name>.+)`}, ids)
	g.Expect(err).To(MatchError(ContainSubstring(`importIDForms.kubectl_manifest: no group (?P<namespace>...)`)))
	_, err = imports.ParseForms(map[string]string{"aws_vpc": `(?P<id>.+)`}, ids)
	g.Expect(err).To(MatchError(ContainSubstring("importIDForms.aws_vpc: importIDs declares no template for the type")))
}
