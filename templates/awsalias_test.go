package templates_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	. "github.com/onsi/gomega"
	"github.com/zclconf/go-cty/cty"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/internal/tftest"
)

// awsRecordSet is one aws_route53_record of a rendered configuration, as far as its
// literals say.
type awsRecordSet struct {
	Type, AliasZone string
	Alias, Records  bool
	DependsOn       bool
}

// awsRecordSets reads the aws_route53_record blocks of a rendered DNS record by address.
func awsRecordSets(g Gomega, main string) map[string]awsRecordSet {
	file, diags := hclsyntax.ParseConfig([]byte(main), "main.tf", hcl.InitialPos)
	g.Expect(diags.HasErrors()).To(BeFalse(), diags.Error())
	literal := func(body *hclsyntax.Body, name string) string {
		attr, ok := body.Attributes[name]
		if !ok {
			return ""
		}
		v, diags := attr.Expr.Value(nil)
		if diags.HasErrors() || v.Type() != cty.String {
			return "(not a literal)"
		}
		return v.AsString()
	}
	sets := map[string]awsRecordSet{}
	for _, block := range file.Body.(*hclsyntax.Body).Blocks {
		if block.Type != "resource" || block.Labels[0] != "aws_route53_record" {
			continue
		}
		set := awsRecordSet{Type: literal(block.Body, "type"), DependsOn: block.Body.Attributes["depends_on"] != nil, Records: block.Body.Attributes["records"] != nil}
		for _, inner := range block.Body.Blocks {
			if inner.Type == "alias" {
				set.Alias, set.AliasZone = true, literal(inner.Body, "zone_id")
			}
		}
		sets["aws_route53_record."+block.Labels[1]] = set
	}
	return sets
}

// TestAliasRecordsOfAWSLoadBalancerCNAMEs: a CNAME whose target is an AWS load balancer
// (ALB and CLB as <region>.elb.amazonaws.com, with or without dualstack., NLB as
// elb.<region>.amazonaws.com) renders, as Gardener's AWS extension writes it, an alias
// record of the region's canonical hosted zone instead (A; AAAA for IPv6 alone; both for
// dual-stack, after the dns.gardener.cloud/ip-stack annotation). Other CNAMEs, a load
// balancer of a region the table lacks among them, stay CNAMEs; an unknown IP stack is
// refused naming the annotation. Each renders a configuration terraform loads and formats
// as it leaves it, and with the hashicorp/aws provider at hand
// (TERRASEED_AWS_PROVIDER_MIRROR, a filesystem mirror holding it) terraform validates it.
func TestAliasRecordsOfAWSLoadBalancerCNAMEs(t *testing.T) {
	r := registry(t)
	k := awsKind(t, r, templates.KindDNSRecord, "aws-route53")
	alias := func(typ, zone string, dependsOn bool) awsRecordSet {
		return awsRecordSet{Type: typ, Alias: true, AliasZone: zone, DependsOn: dependsOn}
	}
	cname := awsRecordSet{Type: "(not a literal)", Records: true}
	for _, c := range []struct {
		name, target, stack string
		want                map[string]awsRecordSet
	}{
		{"ALB", "k8s-ingress-1234567890.eu-west-1.elb.amazonaws.com", "",
			map[string]awsRecordSet{"aws_route53_record.record": alias("A", "Z32O12XQLNTSW2", false)}},
		{"CLB dualstack name", "dualstack.a1b2c3-1234567890.us-east-1.elb.amazonaws.com", "ipv4",
			map[string]awsRecordSet{"aws_route53_record.record": alias("A", "Z35SXDOTRQ7X7K", false)}},
		{"NLB", "a1b2c3d4e5f6-0123456789abcdef.elb.eu-central-1.amazonaws.com", "",
			map[string]awsRecordSet{"aws_route53_record.record": alias("A", "Z3F0SRJ5LGBH90", false)}},
		{"NLB of China", "a1b2-0123456789abcdef.elb.cn-north-1.amazonaws.com.cn", "",
			map[string]awsRecordSet{"aws_route53_record.record": alias("A", "Z3QFB96KMJ7ED6", false)}},
		{"NLB dual-stack", "a1b2c3d4e5f6-0123456789abcdef.elb.eu-central-1.amazonaws.com", "dual-stack",
			map[string]awsRecordSet{"aws_route53_record.record": alias("A", "Z3F0SRJ5LGBH90", false), "aws_route53_record.record_aaaa": alias("AAAA", "Z3F0SRJ5LGBH90", true)}},
		{"ALB IPv6", "k8s-ingress-1234567890.ap-southeast-2.elb.amazonaws.com", "ipv6",
			map[string]awsRecordSet{"aws_route53_record.record": alias("AAAA", "Z1GM3OXH4ZPM65", false)}},
		{"another host", "ingress.example.org", "dual-stack", map[string]awsRecordSet{"aws_route53_record.record": cname}},
		{"a region the table lacks", "a1b2.elb.xx-nowhere-1.amazonaws.com", "", map[string]awsRecordSet{"aws_route53_record.record": cname}},
		{"a suffix alone", "elb.eu-west-1.amazonaws.com", "", map[string]awsRecordSet{"aws_route53_record.record": cname}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			record := awsDNSRecord()
			record.Spec.Name, record.Spec.RecordType, record.Spec.Values = "*.ingress.prod.dev.example.com", extensionsv1alpha1.DNSRecordTypeCNAME, []string{c.target}
			if c.stack != "" {
				record.Annotations = map[string]string{"dns.gardener.cloud/ip-stack": c.stack}
			}
			out, err := k.Render(templates.KindInput{Object: record})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(awsRecordSets(g, out.Files["main.tf"])).To(Equal(c.want))
			tfvars := awsTFVars(t, out)
			if c.want["aws_route53_record.record"].Alias {
				g.Expect(tfvars).To(HaveKeyWithValue("alias_target", c.target))
				g.Expect(tfvars).NotTo(HaveKey("ttl"), "an alias record has no TTL of its own")
			} else {
				g.Expect(tfvars).To(HaveKeyWithValue("record_type", "CNAME"))
				g.Expect(tfvars).To(HaveKeyWithValue("record_values", []any{c.target}))
			}
			checkAWSKindConfig(t, k, out, awsKindCredentials(t, r, k, false))
			validateWithAWSProvider(t, out)
		})
	}

	t.Run("unknown IP stack", func(t *testing.T) {
		record := awsDNSRecord()
		record.Annotations = map[string]string{"dns.gardener.cloud/ip-stack": "ipv5"}
		_, err := k.Render(templates.KindInput{Object: record})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("metadata.annotations[dns.gardener.cloud/ip-stack]: Invalid value: \"ipv5\": must be ipv4, ipv6 or dual-stack")))
	})
}

// TestAliasRecordsAreImportedByZoneNameAndType: the import ID of an alias record, which
// an adoption of Gardener's record names and which a lost state is found again by, is
// <zone>_<name>_<type> like any record set's, the type its own (A, AAAA), never CNAME.
func TestAliasRecordsAreImportedByZoneNameAndType(t *testing.T) {
	g := NewWithT(t)
	k := awsKind(t, registry(t), templates.KindDNSRecord, "aws-route53")
	index, err := k.ImportIDs().Index([]byte(`{"version":4,"serial":3,"lineage":"l","resources":[
		{"mode":"managed","type":"aws_route53_record","name":"record","instances":[{"attributes":{
			"zone_id":"Z0123456789ABCDEFGHIJ","name":"*.ingress.prod.dev.example.com","type":"A","set_identifier":"",
			"alias":[{"name":"a1b2-0123456789abcdef.elb.eu-central-1.amazonaws.com","zone_id":"Z3F0SRJ5LGBH90","evaluate_target_health":true}],
			"records":null,"ttl":0}}]},
		{"mode":"managed","type":"aws_route53_record","name":"record_aaaa","instances":[{"attributes":{
			"zone_id":"Z0123456789ABCDEFGHIJ","name":"*.ingress.prod.dev.example.com","type":"AAAA","set_identifier":"",
			"alias":[{"name":"a1b2-0123456789abcdef.elb.eu-central-1.amazonaws.com","zone_id":"Z3F0SRJ5LGBH90","evaluate_target_health":true}],
			"records":null,"ttl":0}}]}]}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(index.IDs).To(Equal(map[string]string{
		"aws_route53_record.record":      "Z0123456789ABCDEFGHIJ_*.ingress.prod.dev.example.com_A",
		"aws_route53_record.record_aaaa": "Z0123456789ABCDEFGHIJ_*.ingress.prod.dev.example.com_AAAA",
	}))
}

// validateWithAWSProvider runs terraform validate on the rendered configuration with the
// hashicorp/aws provider of the filesystem mirror TERRASEED_AWS_PROVIDER_MIRROR; without
// one the test says so and skips this step: the provider is not among the pinned tools.
func validateWithAWSProvider(t *testing.T, out *templates.Rendered) {
	t.Helper()
	mirror := os.Getenv("TERRASEED_AWS_PROVIDER_MIRROR")
	if mirror == "" {
		t.Log("TERRASEED_AWS_PROVIDER_MIRROR is not set: terraform validate with the hashicorp/aws provider is skipped")
		return
	}
	g := NewWithT(t)
	tf := tftest.New(t, out, nil)
	config := filepath.Join(t.TempDir(), "terraform.rc")
	g.Expect(os.WriteFile(config, fmt.Appendf(nil, "disable_checkpoint = true\nprovider_installation {\n  filesystem_mirror {\n    path = %q\n  }\n}\n", mirror), 0o600)).To(Succeed())
	t.Setenv("TF_CLI_CONFIG_FILE", config)
	g.Expect(tf.Init(context.Background())).To(Succeed())
	res, err := tf.Validate(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Valid).To(BeTrue(), "%v", res.Diagnostics)
}
