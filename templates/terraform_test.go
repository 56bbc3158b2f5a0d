package templates_test

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/terraseed/terraseed/templates/internal/tftest"
)

// TestLocalValidates: every rendered local config passes terraform validate with the real
// kubectl provider from the mirror, and terraform fmt leaves it alone.
func TestLocalValidates(t *testing.T) {
	r := registry(t)
	for _, c := range cases(t, "local") {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			tf := tftest.New(t, render(t, r, c), nil)
			g.Expect(tf.Init(ctx)).To(Succeed())
			res, err := tf.Validate(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Diagnostics).To(BeEmpty())
			g.Expect(res.Valid).To(BeTrue())
			formatted, files, err := tf.FormatCheck(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).To(BeEmpty())
			g.Expect(formatted).To(BeTrue())
		})
	}
}

// TestAWSConfig: the hashicorp/aws provider cannot be installed here, so every rendered
// aws config is checked without it: it parses as HCL, terraform fmt leaves it alone, and
// terraform's config loader finds exactly the variables the tfvars and credentials fill,
// the outputs the status mapping reads, and only resource types the provider declares.
func TestAWSConfig(t *testing.T) {
	r := registry(t)
	p, err := r.Provider("aws")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, c := range cases(t, "aws") {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			out := render(t, r, c)
			parser := hclparse.NewParser()
			for name, content := range out.Files {
				_, diags := parser.ParseHCL([]byte(content), name)
				g.Expect(diags.HasErrors()).To(BeFalse(), "%s: %s", name, diags.Error())
			}
			_, diags := parser.ParseJSON(out.TFVarsJSON, "terraform.tfvars.json")
			g.Expect(diags.HasErrors()).To(BeFalse(), diags.Error())

			tf := tftest.New(t, out, nil)
			formatted, files, err := tf.FormatCheck(context.Background())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).To(BeEmpty())
			g.Expect(formatted).To(BeTrue())

			module, loadDiags := tfconfig.LoadModule(tf.Dir)
			g.Expect(loadDiags.HasErrors()).To(BeFalse(), loadDiags.Error())

			var tfvars map[string]any
			g.Expect(json.Unmarshal(out.TFVarsJSON, &tfvars)).To(Succeed())
			wantVars := sortedKeys(tfvars)
			credentials := p.Manifest.Credentials
			if c.input(t).WorkloadIdentity {
				credentials = p.Manifest.WorkloadIdentity.Credentials
			}
			for _, cred := range credentials {
				if cred.Variable != "" {
					wantVars = append(wantVars, cred.Variable)
				}
			}
			sort.Strings(wantVars)
			g.Expect(sortedKeys(module.Variables)).To(Equal(wantVars))
			g.Expect(module.Variables["endpoint"].Default).To(Equal(""), "the endpoint is optional")

			g.Expect(sortedKeys(module.Outputs)).To(Equal(p.Manifest.Status.Outputs()))

			g.Expect(module.RequiredProviders).To(HaveKey("aws"))
			g.Expect(module.RequiredProviders["aws"].Source).To(Equal("hashicorp/aws"))
			for _, res := range module.ManagedResources {
				g.Expect(p.Manifest.Resources).To(ContainElement(res.Type), "%s is not declared in provider.yaml", res.Type)
				used[res.Type] = true
			}
			for _, res := range module.DataResources {
				g.Expect(p.Manifest.Resources).To(ContainElement("data."+res.Type), "data.%s is not declared in provider.yaml", res.Type)
				used["data."+res.Type] = true
			}
			g.Expect(module.ModuleCalls).To(BeEmpty())
		})
	}
	g := NewWithT(t)
	g.Expect(sortedKeys(used)).To(ConsistOf(p.Manifest.Resources), "the cases exercise every declared resource type")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestAWSLive applies and destroys the one-zone aws config against LocalStack. It needs
// the hashicorp/aws provider in the mirror and LocalStack at LOCALSTACK_ENDPOINT.
func TestAWSLive(t *testing.T) {
	endpoint := os.Getenv("LOCALSTACK_ENDPOINT")
	if endpoint == "" {
		t.Skip("LOCALSTACK_ENDPOINT is not set: no LocalStack (and no hashicorp/aws provider) on this machine; set it to run the aws apply/destroy test")
	}
	g := NewWithT(t)
	r := registry(t)
	p, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	env, err := p.Credentials(&corev1.Secret{Data: map[string][]byte{
		"accessKeyID": []byte("test"), "secretAccessKey": []byte("test"), "endpoint": []byte(endpoint)}})
	g.Expect(err).NotTo(HaveOccurred())

	ctx := context.Background()
	tf := tftest.New(t, render(t, r, renderCase{provider: "aws", name: "one-zone", dir: "testdata/cases/aws/one-zone"}), env)
	g.Expect(tf.Init(ctx)).To(Succeed())
	g.Expect(tf.Apply(ctx)).To(Succeed())
	defer func() { g.Expect(tf.Destroy(ctx)).To(Succeed()) }()
	outputs, err := tf.Outputs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	status, err := p.Status(outputs)
	g.Expect(err).NotTo(HaveOccurred())
	var ps map[string]any
	g.Expect(json.Unmarshal(status.ProviderStatus.Raw, &ps)).To(Succeed())
	g.Expect(ps).To(HaveKeyWithValue("kind", "InfrastructureStatus"))
	g.Expect(ps["vpc"]).To(HaveKeyWithValue("subnets", HaveLen(3)))
	g.Expect(status.NodesCIDR).To(HaveValue(Equal("10.250.0.0/16")))
	g.Expect(status.EgressCIDRs).To(HaveLen(1))
}
