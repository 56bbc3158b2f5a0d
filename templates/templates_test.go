package templates_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/internal/tftest"
)

func infrastructure(infraType, config string) *extensionsv1alpha1.Infrastructure {
	return &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Name: "infrastructure", Namespace: "shoot--dev--third"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec:  extensionsv1alpha1.DefaultSpec{Type: infraType, ProviderConfig: &runtime.RawExtension{Raw: []byte(config)}},
			Region:       "somewhere",
			SSHPublicKey: []byte("ssh-ed25519 AAAA test"),
		},
	}
}

// TestThirdProvider: a provider added as a directory, with no Go changes, validates,
// renders, applies with the real terraform and reports its status.
func TestThirdProvider(t *testing.T) {
	g := NewWithT(t)
	r := registry(t, filepath.Join("testdata", "providers"))
	g.Expect(r.Types()).To(Equal([]string{"aws", "local", "third"}))
	p, err := r.Provider("third")
	g.Expect(err).NotTo(HaveOccurred())

	_, err = p.Render(templates.Input{Infrastructure: infrastructure("third", `{"cidr": "10.1.2.3/16"}`)})
	var verr *templates.ValidationError
	g.Expect(errors.As(err, &verr)).To(BeTrue(), "got %v", err)
	g.Expect(verr.Errors[0].Field).To(Equal("providerConfig.cidr"))

	out, err := p.Render(templates.Input{Infrastructure: infrastructure("third", `{"cidr": "10.1.0.0/16", "labels": {"team": "net"}}`)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Files).To(HaveKey("main.tf"))
	g.Expect(out.Files["variables.tf"]).To(ContainSubstring(`variable "labels"`))
	g.Expect(out.Files["variables.tf"]).To(MatchRegexp(`variable "token" \{\s+type\s+= string\s+sensitive = true`))

	env, err := p.Credentials(&corev1.Secret{Data: map[string][]byte{"token": []byte("s3cret")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"TF_VAR_token": "s3cret"}))

	ctx := context.Background()
	tf := tftest.New(t, out, env)
	g.Expect(tf.Init(ctx)).To(Succeed())
	g.Expect(tf.Apply(ctx)).To(Succeed())
	outputs, err := tf.Outputs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	status, err := p.Status(outputs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.NodesCIDR).To(HaveValue(Equal("10.1.0.0/16")))
	g.Expect(status.ProviderStatus.Raw).To(MatchJSON(`{"apiVersion": "third.provider.example.com/v1alpha1", "kind": "InfrastructureStatus",
		"network": {"name": "infrastructure", "cidr": "10.1.0.0/16"}}`))
	g.Expect(tf.Destroy(ctx)).To(Succeed())
}

// TestRegistry: later directories override embedded providers; unknown types and broken
// provider directories are typed errors.
func TestRegistry(t *testing.T) {
	g := NewWithT(t)
	_, err := registry(t).Provider("gcp")
	var unknown *templates.UnknownProviderError
	g.Expect(errors.As(err, &unknown)).To(BeTrue())
	g.Expect(unknown.Known).To(Equal([]string{"aws", "local"}))

	override := t.TempDir()
	third := filepath.Join("testdata", "providers", "third")
	for _, name := range []string{"schema.json", "main.tf.tpl"} {
		data, err := os.ReadFile(filepath.Join(third, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(override, name), data, 0o600)).To(Succeed())
	}
	manifest, err := os.ReadFile(filepath.Join(third, "provider.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(override, "provider.yaml"), []byte(strings.Replace(string(manifest), "type: third", "type: local", 1)), 0o600)).To(Succeed())
	p, err := registry(t, override).Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Source).To(Equal(override))
	g.Expect(p.Manifest.Status.ProviderStatus.APIVersion).To(Equal("third.provider.example.com/v1alpha1"))

	g.Expect(os.WriteFile(filepath.Join(override, "main.tf.tpl"), []byte(`{{ .infrastructure.name `), 0o600)).To(Succeed())
	_, err = templates.NewRegistry(override)
	var perr *templates.ProviderError
	g.Expect(errors.As(err, &perr)).To(BeTrue(), "got %v", err)
	g.Expect(perr.Source).To(Equal(override))

	_, err = templates.NewRegistry(t.TempDir())
	g.Expect(errors.As(err, &perr)).To(BeTrue(), "an empty directory is a mistake, got %v", err)
}

// hostile strings that would change HCL if they were ever pasted into it.
var hostile = []string{
	`"`, `}`, `${file("/etc/passwd")}`, `%{ for x in y }x%{ endfor }`, "line\nbreak",
	"\" }\nresource \"terraform_data\" \"evil\" {\n  input = \"x\"\n}\n#",
	`{{ .credentials }}`, `\`, "eu-west-1a\"\n  count = 0",
}

// TestProviderConfigIsNeverHCL: replacing every string a user controls with hostile text
// leaves the rendered HCL byte for byte the same, and the text arrives in the tfvars as
// the literal value.
func TestProviderConfigIsNeverHCL(t *testing.T) {
	r := registry(t)
	for _, provider := range []string{"local", "aws"} {
		for _, c := range cases(t, provider) {
			t.Run(provider+"/"+c.name, func(t *testing.T) {
				g := NewWithT(t)
				in := c.input(t)
				p, err := r.Provider(provider)
				g.Expect(err).NotTo(HaveOccurred())
				// The schema and the CIDR rules would reject hostile text early; skip them to
				// prove the templates themselves are safe.
				clean, err := p.RenderUnvalidated(in)
				g.Expect(err).NotTo(HaveOccurred())

				var config any
				g.Expect(json.Unmarshal(in.Infrastructure.Spec.ProviderConfig.Raw, &config)).To(Succeed())
				n := 0
				used := map[string]bool{}
				config = replaceStrings(config, func(string) string {
					n++
					used[hostile[n%len(hostile)]] = true
					return hostile[n%len(hostile)]
				})
				in.Infrastructure.Spec.ProviderConfig.Raw, _ = json.Marshal(config)
				in.Infrastructure.Name = hostile[5]
				in.Infrastructure.Namespace = hostile[2]
				in.Infrastructure.Spec.Region = hostile[0]
				if len(in.Infrastructure.Spec.SSHPublicKey) > 0 { // its presence is structure, its text is not
					in.Infrastructure.Spec.SSHPublicKey = []byte(hostile[3])
				}

				dirty, err := p.RenderUnvalidated(in)
				g.Expect(err).NotTo(HaveOccurred())
				for name, content := range clean.Files {
					g.Expect(cmp.Diff(content, dirty.Files[name])).To(BeEmpty(), "user strings changed %s", name)
				}
				g.Expect(dirty.Files).To(HaveLen(len(clean.Files)))

				var vars map[string]any
				g.Expect(json.Unmarshal(dirty.TFVarsJSON, &vars)).To(Succeed())
				values := flattenStrings(vars)
				g.Expect(values).To(ContainElement(hostile[5]), "the hostile name reaches the tfvars as it is")
				reached := map[string]bool{}
				for _, v := range values {
					if used[v] {
						reached[v] = true
					}
				}
				g.Expect(len(reached)).To(BeNumerically(">=", 3), "hostile providerConfig strings reach the tfvars as they are")
			})
		}
	}
}

func replaceStrings(v any, with func(string) string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k != "apiVersion" && k != "kind" {
				v[k] = replaceStrings(e, with)
			}
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = replaceStrings(e, with)
		}
		return v
	case string:
		return with(v)
	default:
		return v
	}
}

func flattenStrings(v any) []string {
	switch v := v.(type) {
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, flattenStrings(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, flattenStrings(e)...)
		}
		return out
	case string:
		return []string{v}
	default:
		return nil
	}
}

func TestCredentials(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	aws, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloudprovider", Namespace: "shoot--a--b"},
		Data: map[string][]byte{"accessKeyID": []byte("AKIA"), "secretAccessKey": []byte("s3cret")}}
	env, err := aws.Credentials(secret)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s3cret"}))
	g.Expect(aws.OperatorOnlyCredentials(secret)).To(BeEmpty())

	// The endpoint decides where every call goes: only the operator may allow it.
	secret.Data["endpoint"] = []byte("http://localstack:4566")
	g.Expect(aws.OperatorOnlyCredentials(secret)).To(Equal([]string{"endpoint"}))
	env, err = aws.Credentials(secret)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(HaveKeyWithValue("TF_VAR_endpoint", "http://localstack:4566"))

	delete(secret.Data, "secretAccessKey")
	_, err = aws.Credentials(secret)
	var verr *templates.ValidationError
	g.Expect(errors.As(err, &verr)).To(BeTrue())
	g.Expect(verr.Errors).To(HaveLen(1))
	g.Expect(verr.Error()).To(ContainSubstring("data[secretAccessKey]"))
	g.Expect(verr.Error()).To(ContainSubstring("shoot--a--b/cloudprovider"))
	g.Expect(verr.Error()).NotTo(ContainSubstring("AKIA"))

	local, err := r.Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	env, err = local.Credentials(&corev1.Secret{Data: map[string][]byte{"kubeconfig": []byte("apiVersion: v1")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"TF_VAR_kubeconfig": "apiVersion: v1"}))

	// No credential ever reaches the rendered files or the tfvars.
	out := render(t, r, renderCase{provider: "aws", name: "one-zone", dir: "testdata/cases/aws/one-zone"})
	for _, content := range out.Files {
		g.Expect(content).NotTo(ContainSubstring("AKIA"))
	}
}

// TestAWSStatus: terraform outputs shaped as the aws templates declare them become the
// InfrastructureStatus of Gardener's AWS extension.
func TestAWSStatus(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t).Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	var outputs map[string]any
	g.Expect(json.Unmarshal([]byte(`{
		"vpc_id": "vpc-0815",
		"subnets": [{"id": "subnet-1234", "purpose": "nodes", "zone": "eu-west-1b"}, {"id": "subnet-5678", "purpose": "public", "zone": "eu-west-1b"}],
		"security_groups": [{"id": "sg-0246", "purpose": "nodes"}],
		"instance_profiles": [{"name": "shoot--foobar--aws-nodes", "purpose": "nodes"}],
		"roles": [{"arn": "arn:aws:iam::123:role/shoot--foobar--aws-nodes", "purpose": "nodes"}],
		"key_name": "shoot--foobar--aws-ssh-publickey",
		"nodes_cidr": "10.250.0.0/16",
		"egress_cidrs": ["52.1.2.3/32"]}`), &outputs)).To(Succeed())
	status, err := p.Status(outputs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.ProviderStatus.Raw).To(MatchJSON(`{
		"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1",
		"kind": "InfrastructureStatus",
		"ec2": {"keyName": "shoot--foobar--aws-ssh-publickey"},
		"iam": {"instanceProfiles": [{"name": "shoot--foobar--aws-nodes", "purpose": "nodes"}],
		        "roles": [{"arn": "arn:aws:iam::123:role/shoot--foobar--aws-nodes", "purpose": "nodes"}]},
		"vpc": {"id": "vpc-0815", "securityGroups": [{"id": "sg-0246", "purpose": "nodes"}],
		        "subnets": [{"id": "subnet-1234", "purpose": "nodes", "zone": "eu-west-1b"}, {"id": "subnet-5678", "purpose": "public", "zone": "eu-west-1b"}]}}`))
	g.Expect(status.NodesCIDR).To(HaveValue(Equal("10.250.0.0/16")))
	g.Expect(status.EgressCIDRs).To(Equal([]string{"52.1.2.3/32"}))

	delete(outputs, "roles")
	_, err = p.Status(outputs)
	var oerr *templates.OutputError
	g.Expect(errors.As(err, &oerr)).To(BeTrue())
	g.Expect(oerr.Output).To(Equal("roles"))

	outputs["roles"] = []any{}
	outputs["egress_cidrs"] = []any{float64(1)}
	_, err = p.Status(outputs)
	g.Expect(errors.As(err, &oerr)).To(BeTrue())
	g.Expect(oerr.Output).To(Equal("egress_cidrs"))
}
