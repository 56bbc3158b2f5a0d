package templates_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// workloadIdentitySecret is a credentials Secret as gardenlet writes it for a
// CredentialsBinding naming a WorkloadIdentity.
func workloadIdentitySecret(data map[string]string) *corev1.Secret {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--dev--a", Name: "cloudprovider", Labels: map[string]string{
			"security.gardener.cloud/purpose": "workload-identity-token-requestor",
		}},
		Data: map[string][]byte{},
	}
	for k, v := range data {
		secret.Data[k] = []byte(v)
	}
	return secret
}

// TestAWSWorkloadIdentityAssumesTheRoleWithTheTokenFile: a workload identity's Secret
// renders the aws provider to assume the role of its config with the token in a file,
// with no static key anywhere, and the token itself in no file, variable or environment
// value.
func TestAWSWorkloadIdentityAssumesTheRoleWithTheTokenFile(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	var c renderCase
	for _, each := range cases(t, "aws") {
		if each.name == "workload-identity" {
			c = each
		}
	}
	g.Expect(c.name).NotTo(BeEmpty(), "the aws case workload-identity")
	secret := c.secret(t)
	in := c.input(t)
	g.Expect(in.WorkloadIdentity).To(BeTrue(), "the case's secret is a workload identity's")
	p, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())

	out, err := p.Render(in)
	g.Expect(err).NotTo(HaveOccurred())
	main := out.Files["main.tf"]
	g.Expect(main).To(ContainSubstring("assume_role_with_web_identity {"))
	g.Expect(main).To(MatchRegexp(`role_arn\s+= var.role_arn`))
	g.Expect(main).To(MatchRegexp(`web_identity_token_file = var.web_identity_token_file`))
	g.Expect(out.Files["variables.tf"]).To(ContainSubstring(`variable "role_arn"`))
	g.Expect(out.Files["variables.tf"]).To(ContainSubstring(`variable "web_identity_token_file"`))

	env, err := p.Credentials(secret)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"TF_VAR_role_arn": "arn:aws:iam::123456789012:role/shoot-infrastructure"}), "the role ARN from config.roleARN, and nothing else")
	g.Expect(p.CredentialFiles(secret)).To(Equal(map[string]string{"TF_VAR_web_identity_token_file": "token"}), "the token is a file")

	token := string(secret.Data["token"])
	everything := string(out.TFVarsJSON)
	for _, content := range out.Files {
		everything += content
	}
	for _, value := range env {
		everything += value
	}
	g.Expect(everything).NotTo(ContainSubstring(token), "the token itself goes nowhere but its file")
	g.Expect(env).NotTo(HaveKey("AWS_ACCESS_KEY_ID"), "no static key")
	g.Expect(env).NotTo(HaveKey("AWS_SECRET_ACCESS_KEY"), "no static key")
	g.Expect(everything).NotTo(MatchRegexp(`(access_key|secret_key|accessKeyID|secretAccessKey)\s*=`), "no static key")

	// The same Infrastructure with static keys renders no role to assume.
	in.WorkloadIdentity = false
	static, err := p.Render(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(static.Files["main.tf"]).NotTo(ContainSubstring("assume_role_with_web_identity"))
}

// A Secret that lacks what the provider declares, or whose config is not an object, is
// refused naming the field; a provider without workloadIdentity refuses such a Secret.
func TestAWorkloadIdentitySecretLackingWhatIsDeclaredIsRefusedNamingTheField(t *testing.T) {
	aws, err := registry(t).Provider("aws")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	config := `{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"WorkloadIdentityConfig","roleARN":"arn:aws:iam::1:role/r"}`
	for _, c := range []struct {
		name   string
		data   map[string]string
		errors []string
	}{
		{"no token", map[string]string{"config": config}, []string{"data[token]: Required value"}},
		{"no config", map[string]string{"token": "t"}, []string{"data[config]: Required value"}},
		{"no roleARN", map[string]string{"token": "t", "config": `{"kind":"WorkloadIdentityConfig"}`}, []string{"data[config].roleARN: Required value"}},
		{"roleARN not a string", map[string]string{"token": "t", "config": `{"roleARN":{"arn":"x"}}`}, []string{`data[config].roleARN: Invalid value: "(not shown)": must be a string`}},
		{"config not an object", map[string]string{"token": "t", "config": `[not, an, object`}, []string{`data[config]: Invalid value: "(not shown)"`, `with the field "roleARN"`}},
		{"config in YAML", map[string]string{"token": "t", "config": "roleARN: arn:aws:iam::1:role/r\n"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := aws.Credentials(workloadIdentitySecret(c.data))
			if c.errors == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			for _, want := range c.errors {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("arn:aws"), "the config's values are not shown")
		})
	}

	g := NewWithT(t)
	third, err := thirdWith(t, "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = third.Credentials(workloadIdentitySecret(map[string]string{"token": "t", "config": "{}"}))
	g.Expect(err).To(MatchError(ContainSubstring(`metadata.labels[security.gardener.cloud/purpose]: Invalid value: "workload-identity-token-requestor": the credentials secret shoot--dev--a/cloudprovider holds a workload identity's token, and provider "third" declares no workloadIdentity credentials`)))
}

// A bad declaration of file or field credentials stops the provider from loading, naming
// the field.
func TestWorkloadIdentityDeclarationsAreCheckedNamingTheField(t *testing.T) {
	for _, c := range []struct{ yaml, field string }{
		{"workloadIdentity:\n  credentials: []", "workloadIdentity.credentials: declare at least the token"},
		{"workloadIdentity:\n  credentials:\n  - key: token\n    file: true", "workloadIdentity.credentials[0]: set exactly one of env and variable"},
		{"workloadIdentity:\n  credentials:\n  - key: token\n    file: true\n    field: token\n    variable: t", `workloadIdentity.credentials[0]: a file holds the whole key "token": set file or field, not both`},
		{"workloadIdentity:\n  credentials:\n  - key: config\n    field: role.arn\n    variable: r", `workloadIdentity.credentials[0].field "role.arn" is not a field name`},
		{"workloadIdentity:\n  credentials:\n  - key: config\n    field: roleARN\n    variable: r\n  - key: config\n    variable: c", `workloadIdentity.credentials[1]: key "config" is declared whole and by field`},
		{"workloadIdentity:\n  credentials:\n  - key: config\n    variable: c\n  - key: config\n    field: roleARN\n    variable: r", `workloadIdentity.credentials[1]: key "config" is declared whole and by field`},
		{"workloadIdentity:\n  credentials:\n  - key: token\n    file: true\n    variable: a\n  - key: token\n    file: true\n    variable: b", `workloadIdentity.credentials[1]: key "token" (field "") is declared twice`},
		{"workloadIdentity:\n  credentials:\n  - key: token\n    filee: true\n    variable: a", `unknown field "filee"`},
		{"workloadIdentity:\n  credentials:\n  - key: token\n    file: true\n    variable: a\naccount:\n  credentials: [config.roleARN]", `account.credentials[0]: "config.roleARN" is not a key declared in credentials or workloadIdentity.credentials`},
	} {
		t.Run(c.field, func(t *testing.T) {
			_, err := thirdWith(t, c.yaml)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(c.field)))
		})
	}
}
