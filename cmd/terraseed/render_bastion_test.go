package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/test/testenv"
)

const bastionAsGardenlet = "testdata/bastion-as-gardenlet"

// renderedFiles splits what render prints into its files, up to the environment.
func renderedFiles(t *testing.T, out string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, section := range strings.Split(out, "# ---- ")[1:] {
		name, content, _ := strings.Cut(section, "\n")
		if strings.HasPrefix(name, "environment") {
			break
		}
		files[name] = content
	}
	return files
}

// TestRenderBastionAsGardenlet: `terraseed render` of an aws Bastion as gardenlet creates
// it (no providerConfig) with the Cluster gardenlet writes prints a configuration that
// looks the shoot's network up and runs the CloudProfile's bastion image: it parses,
// terraform fmt leaves it alone, and terraform's config loader finds exactly the
// variables the tfvars and credentials fill; and terraform validate accepts it with the
// hashicorp/aws provider, where the machine has it (validateWithAWSProvider).
func TestRenderBastionAsGardenlet(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	g.Expect(runRender([]string{"-f", filepath.Join(bastionAsGardenlet, "bastion.yaml"), "-cluster", filepath.Join(bastionAsGardenlet, "cluster.yaml")}, &out)).To(Succeed())
	files := renderedFiles(t, out.String())
	g.Expect(files).To(HaveKey("main.tf"))
	g.Expect(files).To(HaveKey("terraform.tfvars.json"))

	var tfvars map[string]any
	g.Expect(json.Unmarshal([]byte(files["terraform.tfvars.json"]), &tfvars)).To(Succeed())
	g.Expect(tfvars).To(HaveKeyWithValue("image_id", "ami-0187730000000000b"), "the newest supported gardenlinux for the arm64 machine in eu-west-1")
	g.Expect(tfvars).To(HaveKeyWithValue("instance_type", "t4g.nano"))
	g.Expect(tfvars).To(HaveKeyWithValue("cluster_name", "shoot--dev--prod"))

	dir := t.TempDir()
	parser := hclparse.NewParser()
	for name, content := range files {
		if strings.HasSuffix(name, ".tf") {
			_, diags := parser.ParseHCL([]byte(content), name)
			g.Expect(diags.HasErrors()).To(BeFalse(), "%s: %s", name, diags.Error())
		}
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}
	module, diags := tfconfig.LoadModule(dir)
	g.Expect(diags.HasErrors()).To(BeFalse(), diags.Error())
	var variables, wantVariables []string
	for name := range module.Variables {
		variables = append(variables, name)
	}
	for name := range tfvars {
		wantVariables = append(wantVariables, name)
	}
	wantVariables = append(wantVariables, "endpoint")
	g.Expect(variables).To(ConsistOf(wantVariables))
	var data []string
	for _, res := range module.DataResources {
		data = append(data, res.Type+"."+res.Name)
	}
	slices.Sort(data)
	g.Expect(data).To(Equal([]string{"aws_security_groups.nodes", "aws_subnet.public_utility_z0", "aws_subnets.public_utility_z0"}))
	g.Expect(module.ManagedResources).To(HaveKey("aws_instance.bastion"))
	g.Expect(module.ManagedResources).To(HaveKey("aws_security_group_rule.nodes_ssh_from_bastion"))

	terraform := os.Getenv("TERRASEED_TERRAFORM")
	if terraform == "" {
		t.Fatal("TERRASEED_TERRAFORM is not set: run the tests with `make test`, or `make tools` and `eval \"$(make -s env)\"` first")
	}
	fmtOut, err := exec.Command(terraform, "fmt", "-check", "-diff", dir).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "terraform fmt changes the rendered files:\n%s", fmtOut)
	testenv.ValidateWithAWSProvider(t, terraform, dir)
}

// TestRenderBastionAsGardenletNamesTheCloudProfileField: a Cluster whose CloudProfile
// has no AMI for the bastion's image in the shoot's region fails the render, naming the
// field and what was looked for.
func TestRenderBastionAsGardenletNamesTheCloudProfileField(t *testing.T) {
	g := NewWithT(t)
	cluster, err := os.ReadFile(filepath.Join(bastionAsGardenlet, "cluster.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	g.Expect(os.WriteFile(file, []byte(strings.Replace(string(cluster), "region: eu-west-1", "region: eu-north-1", 1)), 0o600)).To(Succeed())
	err = runRender([]string{"-f", filepath.Join(bastionAsGardenlet, "bastion.yaml"), "-cluster", file}, &bytes.Buffer{})
	g.Expect(err).To(MatchError(ContainSubstring(`invalid aws bastion: cluster.spec.cloudProfile.spec.providerConfig.machineImages: Invalid value: "gardenlinux": ` +
		"the CloudProfileConfig gives image gardenlinux version 1877.3.0 no AMI in region eu-north-1 for architecture arm64")))
}
