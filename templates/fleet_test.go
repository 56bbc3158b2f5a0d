package templates_test

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/templates"
)

// thirdWith is the third test provider with lines added to its provider.yaml.
func thirdWith(t *testing.T, extra string) (*templates.Provider, error) {
	t.Helper()
	fsys := fstest.MapFS{}
	dir := filepath.Join("testdata", "providers", "third")
	for _, name := range []string{"provider.yaml", "schema.json", "main.tf.tpl"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "provider.yaml" {
			data = append(data, "\n"+extra...)
		}
		fsys["third/"+name] = &fstest.MapFile{Data: data}
	}
	return templates.LoadProvider(fsys, "third", "test")
}

func TestTheFleetFieldsOfProviderYAMLAreCheckedNamingTheField(t *testing.T) {
	for _, c := range []struct{ yaml, field string }{
		{"account:\n  credentials: []", "account.credentials"},
		{"account:\n  credentials: [secretAccessKey]", `account.credentials[0]: "secretAccessKey" is not a key declared in credentials`},
		{"account:\n  credentials: [token, token]", `account.credentials[1]: "token" is named twice`},
		{"throttling: ['SlowDown', '(unclosed']", "throttling[1]"},
		{"throttling: ['']", "throttling[0]"},
		{"parallelism: 0", "parallelism: 0 must be between 1 and 100"},
		{"parallelism: 101", "parallelism: 101"},
		{"parallelism: many", "parallelism"},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := thirdWith(t, c.yaml)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(c.field)))
		})
	}
}

// The budget key is the provider's, the region's and the tenant's (the project holding
// the credentials), never a value of the credentials: the tenant writes those.
func TestAProviderSaysWhichAccountARunCallsHowItsThrottlingReadsAndItsParallelism(t *testing.T) {
	g := NewWithT(t)
	p, err := thirdWith(t, "account:\n  credentials: [token]\nthrottling: ['SlowDown: please reduce your request rate']\nparallelism: 4\n")
	g.Expect(err).NotTo(HaveOccurred())
	key := p.AccountKey("eu-west-1", "project-a")
	g.Expect(key).To(MatchRegexp(`^[0-9a-f]{12}$`))
	g.Expect(p.AccountKey("eu-west-1", "project-a")).To(Equal(key))
	g.Expect(p.AccountKey("eu-west-2", "project-a")).NotTo(Equal(key), "another region is another budget")
	g.Expect(p.AccountKey("eu-west-1", "project-b")).NotTo(Equal(key), "another tenant is another budget")
	g.Expect(p.Throttled([]string{"PutObject: SlowDown: please reduce your request rate"})).To(BeTrue())
	g.Expect(p.Throttled([]string{"PutObject: AccessDenied"})).To(BeFalse())
	g.Expect(p.Parallelism()).To(Equal(4))

	plain, err := thirdWith(t, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.AccountKey("eu-west-1", "project-a")).To(BeEmpty(), "no account declared: no budget")
	g.Expect(plain.Parallelism()).To(BeZero())

	aws, err := registry(t).Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	awsKey := aws.AccountKey("eu-west-1", "project-a")
	g.Expect(awsKey).To(MatchRegexp(`^[0-9a-f]{12}$`))
	g.Expect(awsKey).NotTo(Equal(key), "another provider type is another budget")
}
