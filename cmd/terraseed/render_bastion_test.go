package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	. "github.com/onsi/gomega"
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
	validateWithAWSProvider(t, terraform, dir)
}

// validateWithAWSProvider runs terraform validate in dir with the hashicorp/aws provider
// of the filesystem mirror TERRASEED_AWS_PROVIDER_MIRROR (the Makefile sets it where the
// machine has one); without it the test says so and skips this step: the provider is not
// among the pinned tools, whose sources reach no provider of that size.
func validateWithAWSProvider(t *testing.T, terraform, dir string) {
	t.Helper()
	mirror := os.Getenv("TERRASEED_AWS_PROVIDER_MIRROR")
	if mirror == "" {
		t.Log("TERRASEED_AWS_PROVIDER_MIRROR is not set: terraform validate with the hashicorp/aws provider is skipped")
		return
	}
	g := NewWithT(t)
	config := filepath.Join(t.TempDir(), "terraform.rc")
	g.Expect(os.WriteFile(config, fmt.Appendf(nil, "disable_checkpoint = true\nprovider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", mirror), 0o600)).To(Succeed())
	data := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{{"init", "-backend=false", "-input=false", "-no-color"}, {"validate", "-no-color"}} {
		cmd := exec.Command(terraform, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+config, "TF_DATA_DIR="+data)
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "terraform %s:\n%s", args[0], out)
	}
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
