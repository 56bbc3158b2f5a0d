package templates_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/golang-jwt/jwt/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestDNSAccountBudgetKeyIsAKeyedDigestOfTheWholeCredentials: the budget key is the
// provider's and the whole credentials', whatever project or kind the run serves: a
// DNSRecord's credentials under either naming of Gardener's keys and an Infrastructure's
// of the same values share it; another secret key with the same access key ID does not,
// so no tenant joins another's budget by copying a public key ID. A workload identity's
// token counts by the identity it was issued to, not by its bytes, which each renewal
// changes. No value reaches the key.
func TestDNSAccountBudgetKeyIsAKeyedDigestOfTheWholeCredentials(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	aws, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	dns, err := r.Kind(templates.KindDNSRecord, "aws-route53")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dns.Provider()).To(BeIdenticalTo(aws), "a kind's runs share the provider's budgets")
	const keyID, secretKey = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	keyOf := func(data map[string]string) string {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: "route53"}, Data: map[string][]byte{}}
		for k, v := range data {
			secret.Data[k] = []byte(v)
		}
		env, err := dns.Credentials(secret)
		g.Expect(err).NotTo(HaveOccurred())
		return aws.AccountKey(env, nil)
	}

	seeds := keyOf(map[string]string{"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secretKey})
	g.Expect(seeds).To(MatchRegexp(`^[0-9a-f]{12}$`))
	g.Expect(keyOf(map[string]string{"accessKeyID": keyID, "secretAccessKey": secretKey})).To(Equal(seeds), "Gardener's other naming of the keys")
	infraEnv, err := aws.Credentials(&corev1.Secret{Data: map[string][]byte{"accessKeyID": []byte(keyID), "secretAccessKey": []byte(secretKey)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(aws.AccountKey(infraEnv, nil)).To(Equal(seeds), "an Infrastructure of the same credentials")
	g.Expect(keyOf(map[string]string{"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": "another-secret"})).NotTo(Equal(seeds),
		"the same access key ID with another secret key is another budget")
	g.Expect(keyOf(map[string]string{"AWS_ACCESS_KEY_ID": "AKIAOTHER", "AWS_SECRET_ACCESS_KEY": secretKey})).NotTo(Equal(seeds))
	g.Expect(keyOf(map[string]string{"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secretKey, "endpoint": "http://localstack:4566"})).NotTo(Equal(seeds),
		"another endpoint is another cloud")
	for _, v := range []string{keyID, secretKey, "AKIAIOSF", "wJalrXUt"} {
		g.Expect(seeds).NotTo(ContainSubstring(strings.ToLower(v)))
	}

	third, err := thirdWith(t, "account: {}\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.AccountKey(map[string]string{"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secretKey}, nil)).NotTo(Equal(seeds), "another provider type is another budget")
	plain, err := thirdWith(t, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.AccountKey(infraEnv, nil)).To(BeEmpty(), "no account declared: no budget")
	older, err := thirdWith(t, "account:\n  credentials: [token]\n")
	g.Expect(err).NotTo(HaveOccurred(), "an older provider.yaml still loads")
	g.Expect(older.AccountKey(map[string]string{"TF_VAR_token": "a"}, nil)).NotTo(Equal(older.AccountKey(map[string]string{"TF_VAR_token": "b"}, nil)),
		"the keys it names key nothing alone: every value counts")

	// A workload identity: the role is the tenant's to write, the token's subject is not.
	role := map[string]string{"TF_VAR_role_arn": "arn:aws:iam::123456789012:role/dns"}
	tokenOf := func(subject string, expires time.Time) []byte {
		token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Issuer: "https://issuer.gardener.example", Subject: subject, ExpiresAt: jwt.NewNumericDate(expires),
		}).SignedString([]byte("test signing key"))
		g.Expect(err).NotTo(HaveOccurred())
		return []byte(token)
	}
	const subject = "gardener.cloud:workloadidentity:garden-a:dns:0c1d2e3f"
	now := time.Now()
	identity := aws.AccountKey(role, map[string][]byte{"TF_VAR_web_identity_token_file": tokenOf(subject, now.Add(time.Hour))})
	g.Expect(aws.AccountKey(role, map[string][]byte{"TF_VAR_web_identity_token_file": tokenOf(subject, now.Add(2*time.Hour))})).To(Equal(identity),
		"a renewed token of the same identity keeps the budget")
	g.Expect(aws.AccountKey(role, map[string][]byte{"TF_VAR_web_identity_token_file": tokenOf("gardener.cloud:workloadidentity:garden-b:dns:4a5b6c7d", now.Add(time.Hour))})).
		NotTo(Equal(identity), "another project's identity naming the same role is another budget")
	g.Expect(aws.AccountKey(role, nil)).NotTo(Equal(identity))
	g.Expect(aws.AccountKey(role, map[string][]byte{"TF_VAR_web_identity_token_file": []byte("opaque-a")})).
		NotTo(Equal(aws.AccountKey(role, map[string][]byte{"TF_VAR_web_identity_token_file": []byte("opaque-b")})), "a token that is no JWT counts by its bytes")
}

// A provider says how its throttling reads and its parallelism.
func TestAProviderSaysHowItsThrottlingReadsAndItsParallelism(t *testing.T) {
	g := NewWithT(t)
	p, err := thirdWith(t, "account: {}\nthrottling: ['SlowDown: please reduce your request rate']\nparallelism: 4\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Throttled([]string{"PutObject: SlowDown: please reduce your request rate"})).To(BeTrue())
	g.Expect(p.Throttled([]string{"PutObject: AccessDenied"})).To(BeFalse())
	g.Expect(p.Parallelism()).To(Equal(4))
	plain, err := thirdWith(t, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plain.Parallelism()).To(BeZero())
}
