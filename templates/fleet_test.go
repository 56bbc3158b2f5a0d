package templates_test

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

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

func TestAProviderSaysWhichAccountARunCallsHowItsThrottlingReadsAndItsParallelism(t *testing.T) {
	g := NewWithT(t)
	p, err := thirdWith(t, "account:\n  credentials: [token]\nthrottling: ['SlowDown: please reduce your request rate']\nparallelism: 4\n")
	g.Expect(err).NotTo(HaveOccurred())
	env, err := p.Credentials(&corev1.Secret{Data: map[string][]byte{"token": []byte("account-1")}})
	g.Expect(err).NotTo(HaveOccurred())
	key := p.AccountKey("eu-west-1", env)
	g.Expect(key).To(MatchRegexp(`^[0-9a-f]{12}$`))
	g.Expect(p.AccountKey("eu-west-2", env)).NotTo(Equal(key), "another region is another budget")
	g.Expect(p.AccountKey("eu-west-1", map[string]string{env0(env): "account-2"})).NotTo(Equal(key), "another account is another budget")
	g.Expect(p.Throttled([]string{"PutObject: SlowDown: please reduce your request rate"})).To(BeTrue())
	g.Expect(p.Throttled([]string{"PutObject: AccessDenied"})).To(BeFalse())
	g.Expect(p.Parallelism()).To(Equal(4))

	plain, err := thirdWith(t, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.AccountKey("eu-west-1", env)).To(BeEmpty(), "no account declared: no budget")
	g.Expect(plain.Parallelism()).To(BeZero())

	aws, err := registry(t).Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	awsEnv := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}
	awsKey := aws.AccountKey("eu-west-1", awsEnv)
	g.Expect(awsKey).NotTo(BeEmpty())
	g.Expect(aws.AccountKey("eu-west-1", map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "rotated"})).To(Equal(awsKey), "aws: the access key ID, never the secret")
	g.Expect(aws.AccountKey("eu-west-1", map[string]string{"AWS_ACCESS_KEY_ID": "AKIAOTHER", "AWS_SECRET_ACCESS_KEY": "secret"})).NotTo(Equal(awsKey))
}

// env0 is the name of the one variable of env.
func env0(env map[string]string) string {
	for name := range env {
		return name
	}
	return ""
}
