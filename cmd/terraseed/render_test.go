package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const cases = "../../templates/testdata/cases"

// TestRender prints the same files the golden tests hold, and names credentials only.
func TestRender(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	dir := filepath.Join(cases, "aws", "three-zones")
	g.Expect(runRender([]string{"-f", filepath.Join(dir, "infrastructure.yaml"), "--cluster", filepath.Join(dir, "cluster.yaml")}, &out)).To(Succeed())
	golden := filepath.Join("..", "..", "templates", "testdata", "golden", "aws", "three-zones")
	for _, name := range []string{"main.tf", "outputs.tf", "variables.tf", "terraform.tfvars.json"} {
		want, err := os.ReadFile(filepath.Join(golden, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.String()).To(ContainSubstring("# ---- " + name + "\n" + string(want)))
	}
	g.Expect(out.String()).To(ContainSubstring(`# AWS_SECRET_ACCESS_KEY=<redacted: key "secretAccessKey">`))
	g.Expect(out.String()).To(ContainSubstring(`# TF_VAR_endpoint=<redacted: key "endpoint"> (optional)`))
}

// TestRenderWorkloadIdentity prints the golden rendering of a workload identity's
// Secret: the role ARN and the token file, and no static key.
func TestRenderWorkloadIdentity(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	dir := filepath.Join(cases, "aws", "workload-identity")
	g.Expect(runRender([]string{"-f", filepath.Join(dir, "infrastructure.yaml"), "--workload-identity"}, &out)).To(Succeed())
	golden := filepath.Join("..", "..", "templates", "testdata", "golden", "aws", "workload-identity")
	for _, name := range []string{"main.tf", "variables.tf", "terraform.tfvars.json"} {
		want, err := os.ReadFile(filepath.Join(golden, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.String()).To(ContainSubstring("# ---- " + name + "\n" + string(want)))
	}
	g.Expect(out.String()).To(ContainSubstring(`# TF_VAR_web_identity_token_file=<the path of a file holding key "token">`))
	g.Expect(out.String()).To(ContainSubstring(`# TF_VAR_role_arn=<redacted: field "roleARN" of key "config">`))
	g.Expect(out.String()).NotTo(ContainSubstring("# AWS_ACCESS_KEY_ID="))

	g.Expect(runRender([]string{"-f", filepath.Join(cases, "local", "one-zone", "infrastructure.yaml"), "--workload-identity", "--providers", "../../templates/testdata/providers"}, &bytes.Buffer{})).To(Succeed(), "local takes a token too")
}

func TestRenderErrors(t *testing.T) {
	g := NewWithT(t)
	g.Expect(runRender(nil, &bytes.Buffer{})).To(MatchError(ContainSubstring("-f is required")))

	bad := filepath.Join(t.TempDir(), "infra.yaml")
	data, err := os.ReadFile(filepath.Join(cases, "local", "one-zone", "infrastructure.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(bad, []byte(strings.Replace(string(data), "workers: 10.250.0.0/19", "workers: 10.250.1.0/19", 1)), 0o600)).To(Succeed())
	g.Expect(runRender([]string{"-f", bad}, &bytes.Buffer{})).To(MatchError(ContainSubstring("providerConfig.networks.zones[0].workers")))

	var out bytes.Buffer
	g.Expect(runRender([]string{"-f", filepath.Join(cases, "local", "one-zone", "infrastructure.yaml"), "--providers", "../../templates/testdata/providers"}, &out)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("kubectl_manifest"))
}

// TestRenderControlPlane prints the objects a ControlPlane applies, with the network-policy
// labels, and its providerStatus.
func TestRenderControlPlane(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	g.Expect(runRender([]string{"-f", "../../examples/controlplane-local.yaml"}, &out)).To(Succeed())
	text := out.String()
	g.Expect(strings.Count(text, "---\n")).To(Equal(3))
	g.Expect(text).To(ContainSubstring("kind: Deployment"))
	g.Expect(text).To(ContainSubstring("networking.gardener.cloud/to-dns: allowed"))
	g.Expect(text).To(ContainSubstring("--feature-gates=SomeFeature=true"))
	g.Expect(text).To(ContainSubstring("namespace: shoot--dev--local\n"))
	g.Expect(text).To(ContainSubstring("# ---- providerStatus\n# apiVersion: local.provider.terraseed.io/v1alpha1\n"))

	bad := filepath.Join(t.TempDir(), "cp.yaml")
	data, err := os.ReadFile("../../examples/controlplane-local.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(bad, []byte(strings.Replace(string(data), "replicas: 1", "replicas: 5", 1)), 0o600)).To(Succeed())
	g.Expect(runRender([]string{"-f", bad}, &bytes.Buffer{})).To(MatchError(ContainSubstring("providerConfig.cloudControllerManager.replicas")))
}

// A kind besides the Infrastructure renders offline too: its files, and the environment
// its own credentials fill, redacted.
func TestRenderKinds(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		kind, object string
		want         []string
	}{
		{"DNSRecord", `apiVersion: extensions.gardener.cloud/v1alpha1
kind: DNSRecord
metadata: {name: api, namespace: shoot--dev--local}
spec: {type: local, secretRef: {name: dns}, name: api.dev.example.com, recordType: A, values: [192.0.2.1]}
`, []string{`"record_values": [`, `"zone": "dev.example.com"`, "# ---- environment (from secret shoot--dev--local/dns)", `# TF_VAR_kubeconfig=<redacted: key "kubeconfig">`}},
		{"Bastion", `apiVersion: extensions.gardener.cloud/v1alpha1
kind: Bastion
metadata: {name: cli-1, namespace: shoot--dev--local}
spec: {type: local, userData: IyEvYmluL3NoCg==, ingress: [{ipBlock: {cidr: 0.0.0.0/0}}]}
`, []string{`resource "kubectl_manifest" "ssh"`, "# ---- environment (from secret shoot--dev--local/cloudprovider)"}},
		{"BackupBucket", `apiVersion: extensions.gardener.cloud/v1alpha1
kind: BackupBucket
metadata: {name: seed-uid}
spec: {type: local, region: local, secretRef: {name: backup, namespace: garden}}
`, []string{`"owned_namespace": "bucket-seed-uid"`, "from secret garden/backup"}},
		{"SelfHostedShootExposure", `apiVersion: extensions.gardener.cloud/v1alpha1
kind: SelfHostedShootExposure
metadata: {name: prod, namespace: kube-system}
spec: {type: local, port: 443, endpoints: [{nodeName: cp-0, addresses: [{type: InternalIP, address: 10.250.0.10}]}]}
`, []string{`"addresses": [`, `"10.250.0.10"`, `resource "kubectl_manifest" "endpoints"`, "# ---- environment (from secret kube-system/cloudprovider)"}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			g := NewWithT(t)
			file := filepath.Join(dir, c.kind+".yaml")
			g.Expect(os.WriteFile(file, []byte(c.object), 0o600)).To(Succeed())
			var out bytes.Buffer
			g.Expect(runRender([]string{"-f", file}, &out)).To(Succeed())
			for _, want := range c.want {
				g.Expect(out.String()).To(ContainSubstring(want))
			}
		})
	}

	g := NewWithT(t)
	file := filepath.Join(dir, "typo.yaml")
	g.Expect(os.WriteFile(file, []byte("kind: DNSRecord\nspec: {type: locl, name: a.b, recordType: A, values: [192.0.2.1]}\n"), 0o600)).To(Succeed())
	g.Expect(runRender([]string{"-f", file}, &bytes.Buffer{})).To(MatchError(ContainSubstring(`no provider serves dnsrecord type "locl" (known: `)))
	g.Expect(os.WriteFile(file, []byte("kind: DNSRecord\nspec: {type: local, name: a.b, recordType: MX, values: [x]}\n"), 0o600)).To(Succeed())
	g.Expect(runRender([]string{"-f", file}, &bytes.Buffer{})).To(MatchError(ContainSubstring(`spec.recordType: Unsupported value: "MX"`)))
}
