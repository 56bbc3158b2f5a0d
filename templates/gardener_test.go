package templates_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/terraform-exec/tfexec"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/test/testenv"
)

// gardenerAddresses lists the resources Gardener's terraform-era AWS template
// (testdata/gardener) declares for an input: its resource blocks, with the zone loop
// expanded and the blocks of its conditionals kept or left out as the input says.
// Gateway endpoints, which it names after their services, come only with
// networks.vpc.gatewayEndpoints, which our schema refuses (see the test).
func gardenerAddresses(t *testing.T, createVPC bool, zones []map[string]any) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "gardener", "aws-infra-main.tf.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	header := regexp.MustCompile(`^resource "(\w+)" "([^"]+)"`)
	var (
		addresses           []string
		inVPC, inZones, eip bool
		zoneBlock           []string
	)
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case strings.HasPrefix(line, "{{ if .Values.create.vpc"):
			inVPC = true
		case inVPC && strings.HasPrefix(line, "{{- end}}"):
			inVPC = false
		case strings.HasPrefix(line, "{{ range $index, $zone := .Values.zones }}"):
			inZones = true
		case inZones && strings.HasPrefix(line, "{{end}}"):
			inZones = false
		case inZones && strings.HasPrefix(line, "{{- if not $zone.elasticIPAllocationID }}"):
			eip = true
		case inZones && eip && strings.HasPrefix(line, "{{- end }}"):
			eip = false
		}
		m := header.FindStringSubmatch(line)
		switch {
		case m == nil || strings.Contains(m[2], "$ep"):
		case inVPC && !createVPC:
		case inZones && eip:
			zoneBlock = append(zoneBlock, "eip:"+m[1]+"."+m[2])
		case inZones:
			zoneBlock = append(zoneBlock, m[1]+"."+m[2])
		default:
			addresses = append(addresses, m[1]+"."+m[2])
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	for i, zone := range zones {
		for _, address := range zoneBlock {
			if strings.HasPrefix(address, "eip:") {
				if _, allocated := zone["elasticIPAllocationID"]; allocated {
					continue
				}
				address = strings.TrimPrefix(address, "eip:")
			}
			addresses = append(addresses, strings.ReplaceAll(address, "{{ $index }}", fmt.Sprint(i)))
		}
	}
	sort.Strings(addresses)
	return addresses
}

// ourConfig reads the resource addresses and moved blocks of a rendered configuration
// with HCL's parser.
func ourConfig(t *testing.T, out *templates.Rendered) (resources []string, moved map[string]string) {
	t.Helper()
	moved = map[string]string{}
	for name, content := range out.Files {
		file, diags := hclsyntax.ParseConfig([]byte(content), name, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		for _, block := range file.Body.(*hclsyntax.Body).Blocks {
			switch block.Type {
			case "resource":
				resources = append(resources, block.Labels[0]+"."+block.Labels[1])
			case "moved":
				address := func(attr string) string {
					traversal, diags := hcl.AbsTraversalForExpr(block.Body.Attributes[attr].Expr)
					if diags.HasErrors() {
						t.Fatal(diags.Error())
					}
					var parts []string
					for _, step := range traversal {
						switch s := step.(type) {
						case hcl.TraverseRoot:
							parts = append(parts, s.Name)
						case hcl.TraverseAttr:
							parts = append(parts, s.Name)
						default:
							t.Fatalf("%s: moved addresses with indexes are not handled here", name)
						}
					}
					return strings.Join(parts, ".")
				}
				from, to := address("from"), address("to")
				if _, twice := moved[from]; twice {
					t.Fatalf("%s is moved twice", from)
				}
				moved[from] = to
			}
		}
	}
	sort.Strings(resources)
	return resources, moved
}

// TestAWSTakesOverGardenersTerraformState: for every aws case, each resource Gardener's
// terraform-era template would have in its state is in our configuration at the same
// address or reached by a moved block, one to one, so that our apply over that state
// plans no destroy for want of an address. Real terraform then plans a stand-in of
// both, built of its own terraform_data resource (one per address, the type folded into
// the name, so that moves stay within a type as terraform requires), over a state holding
// Gardener's addresses: it must move or keep every one and destroy none.
//
// What this cannot show without the hashicorp/aws provider: that the attributes of a
// kept resource need no replacement. The ones that force one (CIDRs, zones, names, the
// security group's description, the rules' ports) are written as Gardener's are.
func TestAWSTakesOverGardenersTerraformState(t *testing.T) {
	r := registry(t)
	p, err := r.Provider("aws")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases(t, "aws") {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			in := c.input(t)
			var config struct {
				Networks struct {
					VPC   map[string]any   `json:"vpc"`
					Zones []map[string]any `json:"zones"`
				} `json:"networks"`
			}
			g.Expect(yaml.Unmarshal(in.Infrastructure.Spec.ProviderConfig.Raw, &config)).To(Succeed())
			_, createVPC := config.Networks.VPC["cidr"]
			theirs := gardenerAddresses(t, createVPC, config.Networks.Zones)
			g.Expect(theirs).To(ContainElements("aws_security_group.nodes", "aws_key_pair.kubernetes", "aws_route_table.routetable_main"))
			if len(in.Infrastructure.Spec.SSHPublicKey) == 0 {
				// Gardener's template requires the key: without one it rendered nothing.
				theirs = slices.DeleteFunc(theirs, func(a string) bool { return a == "aws_key_pair.kubernetes" })
			}

			out, err := p.Render(in)
			g.Expect(err).NotTo(HaveOccurred())
			ours, moved := ourConfig(t, out)
			targets := map[string]string{}
			for _, address := range theirs {
				target := address
				if to, ok := moved[address]; ok {
					target = to
				}
				g.Expect(ours).To(ContainElement(target), "Gardener's %s has no counterpart", address)
				g.Expect(targets).NotTo(HaveKey(target), "%s and %s would both become %s", targets[target], address, target)
				targets[target] = address
			}
			t.Logf("%d of Gardener's resources: %d kept, %d moved; %d of ours are new", len(theirs), len(theirs)-countMoved(theirs, moved), countMoved(theirs, moved), len(ours)-len(theirs))

			planStandIn(t, theirs, ours, moved)
		})
	}

	// Gardener's gateway endpoints are the one part of its template left out: our schema
	// refuses them, so no state that holds them is ever applied over.
	g := NewWithT(t)
	in := cases(t, "aws")[0].input(t)
	var raw map[string]any
	g.Expect(json.Unmarshal(in.Infrastructure.Spec.ProviderConfig.Raw, &raw)).To(Succeed())
	raw["networks"].(map[string]any)["vpc"].(map[string]any)["gatewayEndpoints"] = []string{"s3"}
	in.Infrastructure.Spec.ProviderConfig.Raw, _ = json.Marshal(raw)
	_, err = p.Render(in)
	g.Expect(err).To(MatchError(ContainSubstring("providerConfig.networks.vpc")))
}

func countMoved(addresses []string, moved map[string]string) int {
	n := 0
	for _, a := range addresses {
		if _, ok := moved[a]; ok {
			n++
		}
	}
	return n
}

// standIn names the terraform_data that stands in for a resource address.
func standIn(address string) string { return strings.Replace(address, ".", "__", 1) }

// planStandIn plans, with the real terraform, our addresses and moves as terraform_data
// resources over a state of Gardener's, and expects no resource destroyed.
func planStandIn(t *testing.T, theirs, ours []string, moved map[string]string) {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	var config strings.Builder
	for _, address := range ours {
		fmt.Fprintf(&config, "resource \"terraform_data\" %q {}\n", standIn(address))
	}
	for from, to := range moved {
		fmt.Fprintf(&config, "moved {\n  from = terraform_data.%s\n  to   = terraform_data.%s\n}\n", standIn(from), standIn(to))
	}
	g.Expect(os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config.String()), 0o600)).To(Succeed())
	type instance struct {
		SchemaVersion int            `json:"schema_version"`
		Attributes    map[string]any `json:"attributes"`
	}
	type resource struct {
		Mode      string     `json:"mode"`
		Type      string     `json:"type"`
		Name      string     `json:"name"`
		Provider  string     `json:"provider"`
		Instances []instance `json:"instances"`
	}
	var resources []resource
	for i, address := range theirs {
		resources = append(resources, resource{
			Mode: "managed", Type: "terraform_data", Name: standIn(address), Provider: `provider["terraform.io/builtin/terraform"]`,
			Instances: []instance{{Attributes: map[string]any{"id": fmt.Sprintf("id-%d", i), "input": nil, "output": nil, "triggers_replace": nil}}},
		})
	}
	state, err := json.Marshal(map[string]any{"version": 4, "terraform_version": "1.5.7", "serial": 1, "lineage": "gardener", "outputs": map[string]any{}, "resources": resources})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "terraform.tfstate"), state, 0o600)).To(Succeed())

	tf, err := tfexec.NewTerraform(dir, testenv.Terraform(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tf.SetEnv(map[string]string{"TF_CLI_CONFIG_FILE": testenv.TerraformCLIConfig(t)})).To(Succeed())
	ctx := context.Background()
	g.Expect(tf.Init(ctx)).To(Succeed())
	var out strings.Builder
	_, err = tf.PlanJSON(ctx, &out)
	g.Expect(err).NotTo(HaveOccurred(), out.String())
	actions := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		var m struct {
			Type   string `json:"type"`
			Change struct {
				Resource struct {
					Addr string `json:"addr"`
				} `json:"resource"`
				PreviousResource *struct {
					Addr string `json:"addr"`
				} `json:"previous_resource"`
				Action string `json:"action"`
			} `json:"change"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Type == "planned_change" {
			actions[m.Change.Action] = append(actions[m.Change.Action], m.Change.Resource.Addr)
		}
	}
	g.Expect(actions["delete"]).To(BeEmpty(), "terraform would destroy these")
	g.Expect(actions["replace"]).To(BeEmpty(), "terraform would replace these")
	g.Expect(actions["move"]).To(HaveLen(countMoved(theirs, moved)), "terraform moves every renamed resource")
	created := slices.Clone(actions["create"])
	sort.Strings(created)
	g.Expect(len(created)).To(Equal(len(ours)-len(theirs)), "only resources Gardener's template did not have are created: %v", created)
}
