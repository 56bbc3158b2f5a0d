package templates_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/templates/internal/tftest"
)

const awsBucketName = "8c3e6e5b-5f1a-4c3e-9d43-2c5b0f0e6a11"

func awsBackupBucket(providerConfig string) *extensionsv1alpha1.BackupBucket {
	b := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: awsBucketName},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"},
			Region:      "eu-west-1",
			SecretRef:   corev1.SecretReference{Name: "backup-aws", Namespace: "garden"},
		},
	}
	if providerConfig != "" {
		b.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(providerConfig)}
	}
	return b
}

func awsBackupEntry(name string) *extensionsv1alpha1.BackupEntry {
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws"},
			Region:      "eu-west-1",
			BucketName:  awsBucketName,
			SecretRef:   corev1.SecretReference{Name: "entry-shoot--dev--prod", Namespace: "garden"},
		},
	}
}

func awsDNSRecord() *extensionsv1alpha1.DNSRecord {
	return &extensionsv1alpha1.DNSRecord{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-external", Namespace: "shoot--dev--prod"},
		Spec: extensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws-route53"},
			SecretRef:   corev1.SecretReference{Name: "dnsrecord-prod-external", Namespace: "shoot--dev--prod"},
			Name:        "api.prod.dev.example.com",
			RecordType:  extensionsv1alpha1.DNSRecordTypeA,
			Values:      []string{"192.0.2.10", "192.0.2.11"},
		},
	}
}

const awsBastionConfig = `{"apiVersion": "aws.provider.terraseed.io/v1alpha1", "kind": "BastionConfig",
	"vpcID": "vpc-0a1b2c3d", "subnetID": "subnet-0e1f2a3b", "imageID": "ami-0c55b159cbfafe1f0"}`

func awsBastion(providerConfig string) *extensionsv1alpha1.Bastion {
	return &extensionsv1alpha1.Bastion{
		ObjectMeta: metav1.ObjectMeta{Name: "cli-xd3a5k2m", Namespace: "shoot--dev--prod"},
		Spec: extensionsv1alpha1.BastionSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "aws", ProviderConfig: &runtime.RawExtension{Raw: []byte(providerConfig)}},
			UserData:    []byte("#!/bin/bash\necho 'ssh-ed25519 AAAAC3Nza gardener' >> /home/gardener/.ssh/authorized_keys\n"),
			Ingress: []extensionsv1alpha1.BastionIngressPolicy{
				{IPBlock: networkingv1.IPBlock{CIDR: "203.0.113.0/24"}},
				{IPBlock: networkingv1.IPBlock{CIDR: "2001:DB8::/32"}},
			},
		},
	}
}

// awsShootCluster is the Cluster of a Bastion's shoot, of which the templates read the
// region and the IP families.
func awsShootCluster(t *testing.T, region string, ipFamilies ...string) *extensionsv1alpha1.Cluster {
	t.Helper()
	networking := map[string]any{"nodes": "10.250.0.0/16"}
	if len(ipFamilies) > 0 {
		networking["ipFamilies"] = ipFamilies
	}
	shoot, err := json.Marshal(map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
		"metadata": map[string]any{"name": "prod", "namespace": "garden-dev"},
		"spec":     map[string]any{"region": region, "provider": map[string]any{"type": "aws"}, "networking": networking},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--prod"},
		Spec: extensionsv1alpha1.ClusterSpec{
			Shoot:        runtime.RawExtension{Raw: shoot},
			CloudProfile: runtime.RawExtension{Raw: []byte(`{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile"}`)},
			Seed:         &runtime.RawExtension{Raw: []byte(`{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Seed"}`)},
		},
	}
}

func awsKind(t *testing.T, r *templates.Registry, kind templates.Kind, specType string) *templates.KindProvider {
	t.Helper()
	k, err := r.Kind(kind, specType)
	if err != nil {
		t.Fatal(err)
	}
	if k.Type != "aws" {
		t.Fatalf("%s of type %s is served by provider %q, not aws", kind, specType, k.Type)
	}
	return k
}

func awsTFVars(t *testing.T, out *templates.Rendered) map[string]any {
	t.Helper()
	var tfvars map[string]any
	if err := json.Unmarshal(out.TFVarsJSON, &tfvars); err != nil {
		t.Fatal(err)
	}
	return tfvars
}

// awsKindCredentials are the credentials a kind's run gets: a workload identity's, else
// the kind's own, else the provider's.
func awsKindCredentials(t *testing.T, r *templates.Registry, k *templates.KindProvider, workloadIdentity bool) []templates.Credential {
	t.Helper()
	p, err := r.Provider("aws")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case workloadIdentity:
		return p.Manifest.WorkloadIdentity.Credentials
	case len(k.Manifest.Credentials) > 0:
		return k.Manifest.Credentials
	default:
		return p.Manifest.Credentials
	}
}

// checkAWSKindConfig checks a rendered kind as TestAWSConfig checks the Infrastructure,
// since the hashicorp/aws provider cannot be installed here to validate it: it parses,
// terraform fmt leaves it alone, and terraform's config loader finds exactly the
// variables the tfvars and credentials fill, every output the status mapping reads, and
// only resource types the kind declares. It returns the types it found, data sources as
// "data.<type>".
func checkAWSKindConfig(t *testing.T, k *templates.KindProvider, out *templates.Rendered, credentials []templates.Credential) []string {
	t.Helper()
	g := NewWithT(t)
	types := checkAWSKindModule(t, k, out, credentials)
	tf := tftest.New(t, out, nil)
	formatted, files, err := tf.FormatCheck(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(BeEmpty())
	g.Expect(formatted).To(BeTrue())
	return types
}

// checkAWSKindModule is checkAWSKindConfig without terraform fmt, which needs the
// terraform binary.
func checkAWSKindModule(t *testing.T, k *templates.KindProvider, out *templates.Rendered, credentials []templates.Credential) []string {
	t.Helper()
	g := NewWithT(t)
	parser := hclparse.NewParser()
	dir := t.TempDir()
	for name, content := range out.Files {
		_, diags := parser.ParseHCL([]byte(content), name)
		g.Expect(diags.HasErrors()).To(BeFalse(), "%s: %s", name, diags.Error())
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}
	_, diags := parser.ParseJSON(out.TFVarsJSON, "terraform.tfvars.json")
	g.Expect(diags.HasErrors()).To(BeFalse(), diags.Error())

	module, loadDiags := tfconfig.LoadModule(dir)
	g.Expect(loadDiags.HasErrors()).To(BeFalse(), loadDiags.Error())

	wantVars := sortedKeys(awsTFVars(t, out))
	for _, c := range credentials {
		if c.Variable != "" {
			wantVars = append(wantVars, c.Variable)
		}
	}
	sort.Strings(wantVars)
	g.Expect(sortedKeys(module.Variables)).To(Equal(wantVars))
	g.Expect(module.Variables).To(HaveKey("endpoint"))
	g.Expect(module.Variables["endpoint"].Default).To(Equal(""), "the endpoint is optional")

	g.Expect(sortedKeys(module.Outputs)).To(ContainElements(k.Manifest.Outputs()))

	g.Expect(module.RequiredProviders).To(HaveKey("aws"))
	g.Expect(module.RequiredProviders["aws"].Source).To(Equal("hashicorp/aws"))
	g.Expect(module.ModuleCalls).To(BeEmpty())
	var types []string
	for _, res := range module.ManagedResources {
		g.Expect(k.Manifest.Resources).To(ContainElement(res.Type), "%s is not declared in kinds.%s", res.Type, k.Kind)
		types = append(types, res.Type)
	}
	for _, res := range module.DataResources {
		g.Expect(k.Manifest.Resources).To(ContainElement("data."+res.Type), "data.%s is not declared in kinds.%s", res.Type, k.Kind)
		types = append(types, "data."+res.Type)
	}
	return types
}

// TestAWSKindConfigs: every kind of the aws provider, in each of its shapes, renders a
// configuration terraform loads with exactly the variables, outputs and resource types
// its declaration promises, and together the shapes use every declared type.
func TestAWSKindConfigs(t *testing.T) {
	r := registry(t)
	zone, foundZone := "Z0123456789ABCDEFGHIJ", "Z9876543210ZYXWVUTSRQ"
	ttl := int64(300)
	region := "eu-central-1"
	recordWithZone := awsDNSRecord()
	recordWithZone.Spec.Zone, recordWithZone.Spec.TTL, recordWithZone.Spec.Region = &zone, &ttl, &region
	recordWithFoundZone := awsDNSRecord()
	recordWithFoundZone.Status.Zone = &foundZone
	cname := awsDNSRecord()
	cname.Spec.Name, cname.Spec.RecordType, cname.Spec.Values = "*.ingress.prod.dev.example.com", extensionsv1alpha1.DNSRecordTypeCNAME, []string{"a1b2.elb.eu-west-1.amazonaws.com"}

	cases := []struct {
		name     string
		kind     templates.Kind
		specType string
		object   templates.KindObject
		cluster  *extensionsv1alpha1.Cluster
	}{
		{"bucket", templates.KindBackupBucket, "aws", awsBackupBucket(""), nil},
		{"immutable bucket", templates.KindBackupBucket, "aws", awsBackupBucket(`{"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "BackupBucketConfig",
			"immutability": {"retentionType": "bucket", "retentionPeriod": "96h", "mode": "compliance"}}`), nil},
		{"entry", templates.KindBackupEntry, "aws", awsBackupEntry("shoot--dev--prod--1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"), nil},
		{"entry of a source backup", templates.KindBackupEntry, "aws", awsBackupEntry("source-shoot--dev--prod--1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"), nil},
		{"record in a zone to find", templates.KindDNSRecord, "aws-route53", awsDNSRecord(), nil},
		{"record in a given zone", templates.KindDNSRecord, "aws-route53", recordWithZone, nil},
		{"record in the zone found before", templates.KindDNSRecord, "aws-route53", recordWithFoundZone, nil},
		{"wildcard CNAME", templates.KindDNSRecord, "aws-route53", cname, nil},
		{"bastion", templates.KindBastion, "aws", awsBastion(awsBastionConfig), awsShootCluster(t, "eu-west-1")},
		{"bastion reaching the nodes' group", templates.KindBastion, "aws",
			awsBastion(strings.Replace(awsBastionConfig, `"vpcID"`, `"workerSecurityGroupID": "sg-0f1e2d3c", "instanceType": "t3.micro", "vpcID"`, 1)),
			awsShootCluster(t, "eu-west-1", "IPv4", "IPv6")},
		{"bastion as gardenlet creates it", templates.KindBastion, "aws", gardenletBastion(), gardenerBastionCluster(t, nil)},
		{"exposure", kindExposure, "aws", exposure("aws", ""), awsShootCluster(t, "eu-west-1")},
	}
	used := map[templates.Kind]map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			k := awsKind(t, r, c.kind, c.specType)
			out, err := k.Render(templates.KindInput{Object: c.object, Cluster: c.cluster})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring("assume_role_with_web_identity"))
			if used[c.kind] == nil {
				used[c.kind] = map[string]bool{}
			}
			for _, typ := range checkAWSKindConfig(t, k, out, awsKindCredentials(t, r, k, false)) {
				used[c.kind][typ] = true
			}
		})
	}
	for _, c := range cases {
		k := awsKind(t, r, c.kind, c.specType)
		NewWithT(t).Expect(sortedKeys(used[c.kind])).To(ConsistOf(k.Manifest.Resources), "the cases of %s use every type it declares", c.kind)
	}
	NewWithT(t).Expect(used).To(HaveLen(len(templates.Kinds)), "aws serves every kind")
}

// TestAWSKindWorkloadIdentity: with a workload identity's Secret every kind, the DNS
// record too, assumes the identity's role with the token file instead of reading static
// keys, and declares exactly the identity's variables.
func TestAWSKindWorkloadIdentity(t *testing.T) {
	r := registry(t)
	for _, c := range []struct {
		kind     templates.Kind
		specType string
		object   templates.KindObject
		cluster  *extensionsv1alpha1.Cluster
	}{
		{templates.KindBackupBucket, "aws", awsBackupBucket(""), nil},
		{templates.KindBackupEntry, "aws", awsBackupEntry("shoot--dev--prod--1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"), nil},
		{templates.KindDNSRecord, "aws-route53", awsDNSRecord(), nil},
		{templates.KindBastion, "aws", awsBastion(awsBastionConfig), awsShootCluster(t, "eu-west-1")},
		{kindExposure, "aws", exposure("aws", ""), awsShootCluster(t, "eu-west-1")},
	} {
		t.Run(string(c.kind), func(t *testing.T) {
			g := NewWithT(t)
			k := awsKind(t, r, c.kind, c.specType)
			out, err := k.Render(templates.KindInput{Object: c.object, Cluster: c.cluster, WorkloadIdentity: true})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.Files["main.tf"]).To(MatchRegexp(`assume_role_with_web_identity \{\s+role_arn\s+= var.role_arn\s+web_identity_token_file = var.web_identity_token_file\s+\}`))
			checkAWSKindModule(t, k, out, awsKindCredentials(t, r, k, true))
		})
	}
}

// TestAWSKindBackupBucket: the bucket is named after the BackupBucket in its region,
// protected, and immutable for whole days only when the providerConfig asks for it; it
// generates no Secret.
func TestAWSKindBackupBucket(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	k := awsKind(t, r, templates.KindBackupBucket, "aws")
	g.Expect(k.Manifest.ProtectedResources).To(ConsistOf("aws_s3_bucket"))

	out, err := k.Render(templates.KindInput{Object: awsBackupBucket("")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(Equal(map[string]any{"bucket_name": awsBucketName, "region": "eu-west-1"}))
	g.Expect(out.Files["main.tf"]).To(ContainSubstring(`sse_algorithm = "AES256"`))
	g.Expect(out.Files["main.tf"]).To(MatchRegexp(`abort_incomplete_multipart_upload \{\s+days_after_initiation = 7\s+\}`))
	g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring("object_lock_enabled = true"), "a bucket without immutability has no object lock")
	g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring(`resource "aws_s3_bucket_object_lock_configuration"`))
	g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring(`resource "aws_s3_bucket_versioning"`), "nor versioning, as Gardener's")

	immutable := func(period, mode string) *extensionsv1alpha1.BackupBucket {
		return awsBackupBucket(`{"immutability": {"retentionType": "bucket", "retentionPeriod": "` + period + `", "mode": "` + mode + `"}}`)
	}
	out, err = k.Render(templates.KindInput{Object: immutable("96h", "compliance")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("object_lock_days", BeNumerically("==", 4)))
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("object_lock_mode", "COMPLIANCE"))
	g.Expect(out.Files["main.tf"]).To(ContainSubstring("object_lock_enabled = true"))
	out, err = k.Render(templates.KindInput{Object: immutable("24h0m0s", "governance")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("object_lock_days", BeNumerically("==", 1)))
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("object_lock_mode", "GOVERNANCE"))

	for _, c := range []struct{ period, mode, field string }{
		{"36h", "compliance", "providerConfig.immutability.retentionPeriod"},
		{"12h", "governance", "providerConfig.immutability.retentionPeriod"},
		{"4d", "governance", "providerConfig.immutability.retentionPeriod"},
		{"96h30m", "governance", "providerConfig.immutability.retentionPeriod"},
		{"96h", "forever", "providerConfig.immutability.mode"},
	} {
		_, err = k.Render(templates.KindInput{Object: immutable(c.period, c.mode)})
		var invalid *templates.ValidationError
		g.Expect(errors.As(err, &invalid)).To(BeTrue(), "%s %s: got %v", c.period, c.mode, err)
		g.Expect(err.Error()).To(ContainSubstring(c.field), "%s %s", c.period, c.mode)
	}

	// As Gardener's AWS extension, no generated Secret: gardenlet hands the bucket's own
	// credentials to its entries.
	status, err := k.Status(map[string]any{"bucket_name": awsBucketName, "region": "eu-west-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.GeneratedSecret).To(BeNil())
	g.Expect(status.Fields).To(BeEmpty())
}

// TestAWSKindBackupEntry: an entry creates nothing; it reads its bucket and reports the
// prefix its backups go under, which a source backup's entry shares with the shoot's.
func TestAWSKindBackupEntry(t *testing.T) {
	g := NewWithT(t)
	k := awsKind(t, registry(t), templates.KindBackupEntry, "aws")
	g.Expect(k.Manifest.ProtectedResources).To(BeEmpty())
	const entry = "shoot--dev--prod--1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"
	for _, name := range []string{entry, "source-" + entry} {
		out, err := k.Render(templates.KindInput{Object: awsBackupEntry(name)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(awsTFVars(t, out)).To(Equal(map[string]any{"bucket_name": awsBucketName, "region": "eu-west-1", "prefix": entry + "/"}), name)
		g.Expect(out.Files["main.tf"]).NotTo(MatchRegexp(`(?m)^resource `), "%s: Gardener creates nothing for an entry", name)
		g.Expect(out.Files["outputs.tf"]).To(ContainSubstring(`output "region"`), name)
	}
	// etcd-backup holds the region besides the credentials and bucketName, as Gardener's
	// AWS extension writes it.
	data, err := k.EtcdBackupData(map[string]any{"prefix": entry + "/", "region": "eu-west-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(Equal(map[string][]byte{"region": []byte("eu-west-1")}))
	_, err = k.EtcdBackupData(map[string]any{"prefix": entry + "/"})
	g.Expect(err).To(MatchError(ContainSubstring(`terraform output "region" is missing`)))
}

// TestAWSKindDNSRecord: Gardener's aws-route53 records are served by the aws provider in
// the zone given, else found before, else looked up; their TTL and region have
// Gardener's defaults; and a DNS provider's secret reaches terraform under either naming
// of its keys.
func TestAWSKindDNSRecord(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	k := awsKind(t, r, templates.KindDNSRecord, "aws-route53")
	_, err := r.Kind(templates.KindDNSRecord, "aws")
	var unknown *templates.UnknownKindTypeError
	g.Expect(errors.As(err, &unknown)).To(BeTrue(), "Gardener names the AWS DNS type aws-route53, got %v", err)

	record := awsDNSRecord()
	out, err := k.Render(templates.KindInput{Object: record})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(Equal(map[string]any{
		"region": "us-east-1", "record_name": "api.prod.dev.example.com", "record_type": "A",
		"ttl": float64(120), "record_values": []any{"192.0.2.10", "192.0.2.11"},
	}))
	g.Expect(out.Files["main.tf"]).To(ContainSubstring(`data "aws_route53_zones" "all"`), "an unknown zone is looked up")
	g.Expect(out.Files["main.tf"]).To(MatchRegexp(`allow_overwrite\s+= true`))

	found, given, region, ttl := "Z9876543210ZYXWVUTSRQ", "Z0123456789ABCDEFGHIJ", "eu-central-1", int64(60)
	record.Status.Zone = &found
	out, err = k.Render(templates.KindInput{Object: record})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("zone_id", found))
	g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring("aws_route53_zone"), "the zone found before is not looked up again")

	record.Spec.Zone, record.Spec.Region, record.Spec.TTL = &given, &region, &ttl
	out, err = k.Render(templates.KindInput{Object: record})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("zone_id", given), "spec.zone comes first")
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("region", region))
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("ttl", BeNumerically("==", 60)))

	status, err := k.Status(map[string]any{"zone": given})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Fields).To(Equal(map[string]string{"zone": given}))

	env, err := k.Credentials(&corev1.Secret{Data: map[string][]byte{
		"AWS_ACCESS_KEY_ID": []byte("AKIAIOSFODNN7EXAMPLE"), "AWS_SECRET_ACCESS_KEY": []byte("wJalrXUtnFEMI/K7MDENG"),
	}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG"}))
	env, err = k.Credentials(&corev1.Secret{Data: map[string][]byte{
		"accessKeyID": []byte("AKIAOWN"), "secretAccessKey": []byte("own"), "AWS_ACCESS_KEY_ID": []byte("AKIAALIAS"),
		"endpoint": []byte("http://localstack:4566"),
	}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"AWS_ACCESS_KEY_ID": "AKIAOWN", "AWS_SECRET_ACCESS_KEY": "own", "TF_VAR_endpoint": "http://localstack:4566"}))
	g.Expect(k.OperatorOnlyCredentials(&corev1.Secret{Data: map[string][]byte{"endpoint": []byte("http://localstack:4566")}})).To(Equal([]string{"endpoint"}))
	_, err = k.Credentials(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "route53", Namespace: "garden"}, Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA")}})
	g.Expect(err).To(MatchError(ContainSubstring("data[secretAccessKey]: Required value: the credentials secret garden/route53 must hold this key or one of AWS_SECRET_ACCESS_KEY")))
}

// TestAWSKindBastion: the bastion runs where its providerConfig says, in the shoot's
// region, lets SSH in from the ingress blocks, and reports its public address.
func TestAWSKindBastion(t *testing.T) {
	g := NewWithT(t)
	k := awsKind(t, registry(t), templates.KindBastion, "aws")
	g.Expect(k.Manifest.ProtectedResources).To(BeEmpty(), "everything goes with the Bastion")

	b := awsBastion(awsBastionConfig)
	out, err := k.Render(templates.KindInput{Object: b, Cluster: awsShootCluster(t, "eu-west-1")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(Equal(map[string]any{
		"region": "eu-west-1", "cluster_name": "shoot--dev--prod", "bastion_name": "cli-xd3a5k2m",
		"ingress_cidrs": []any{"203.0.113.0/24", "2001:DB8::/32"},
		"vpc_id":        "vpc-0a1b2c3d", "subnet_id": "subnet-0e1f2a3b", "image_id": "ami-0c55b159cbfafe1f0", "instance_type": "t3.nano",
		"user_data": base64.StdEncoding.EncodeToString(b.Spec.UserData),
	}))
	g.Expect(out.Files["main.tf"]).To(MatchRegexp(`associate_public_ip_address\s+= true`))
	g.Expect(out.Files["main.tf"]).To(ContainSubstring(`data "aws_vpc" "vpc"`), "without the nodes' group the bastion reaches the VPC")
	g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring("ipv6_address_count"), "an IPv4 shoot's bastion has no IPv6 address")

	out, err = k.Render(templates.KindInput{
		Object:  awsBastion(strings.Replace(awsBastionConfig, `"vpcID"`, `"region": "us-west-2", "workerSecurityGroupID": "sg-0f1e2d3c", "vpcID"`, 1)),
		Cluster: awsShootCluster(t, "eu-west-1", "IPv6"),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("region", "us-west-2"))
	g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("worker_security_group_id", "sg-0f1e2d3c"))
	g.Expect(out.Files["main.tf"]).To(ContainSubstring(`resource "aws_security_group_rule" "nodes_ssh_from_bastion"`))
	g.Expect(out.Files["main.tf"]).NotTo(ContainSubstring("aws_vpc"))
	g.Expect(out.Files["main.tf"]).To(MatchRegexp(`ipv6_address_count\s+= 1`))

	_, err = k.Render(templates.KindInput{Object: awsBastion(awsBastionConfig)})
	var invalid *templates.ValidationError
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("providerConfig.region"), "without a Cluster the region is unknown")
	_, err = k.Render(templates.KindInput{Object: awsBastion(`{"subnetID": "subnet-0e1f2a3b", "imageID": "ami-0c55b159cbfafe1f0"}`), Cluster: awsShootCluster(t, "eu-west-1")})
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("vpcID"))

	status, err := k.Status(map[string]any{"ip": "198.51.100.7", "hostname": "ec2-198-51-100-7.eu-west-1.compute.amazonaws.com"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Fields).To(Equal(map[string]string{"ingress.ip": "198.51.100.7", "ingress.hostname": "ec2-198-51-100-7.eu-west-1.compute.amazonaws.com"}))
}

// TestAWSKindObjectsAreNeverHCL: hostile text in every string of an object, and of its
// providerConfig, leaves the rendered HCL byte for byte the same and arrives in the tfvars
// as the literal value; a DNS name that passes validation yet holds a quote and an
// interpolation reaches the tfvars only.
func TestAWSKindObjectsAreNeverHCL(t *testing.T) {
	r := registry(t)
	h := func(i int) string { return hostile[i%len(hostile)] }
	zone := "Z0123456789ABCDEFGHIJ"
	region := "us-east-1"

	cleanRecord := awsDNSRecord()
	cleanRecord.Spec.Zone, cleanRecord.Spec.Region = &zone, &region
	dirtyRecord := awsDNSRecord()
	dirtyZone, dirtyRegion := h(1), h(2)
	dirtyRecord.Name, dirtyRecord.Namespace = h(3), h(4)
	dirtyRecord.Spec.Name, dirtyRecord.Spec.RecordType, dirtyRecord.Spec.Values = h(5), extensionsv1alpha1.DNSRecordType(h(6)), []string{h(7), h(8)}
	dirtyRecord.Spec.Zone, dirtyRecord.Spec.Region = &dirtyZone, &dirtyRegion

	immutability := func(period, mode string) string {
		raw, _ := json.Marshal(map[string]any{"immutability": map[string]string{"retentionType": "bucket", "retentionPeriod": period, "mode": mode}})
		return string(raw)
	}
	dirtyBucket := awsBackupBucket(immutability(h(3), h(4)))
	dirtyBucket.Name, dirtyBucket.Spec.Region = h(5), h(6)

	dirtyEntry := awsBackupEntry("source-" + h(5))
	dirtyEntry.Spec.BucketName, dirtyEntry.Spec.Region = h(2), h(8)

	bastionConfig := func(s func(int) string) string {
		raw, _ := json.Marshal(map[string]string{"vpcID": s(1), "subnetID": s(2), "imageID": s(3), "instanceType": s(4), "region": s(5)})
		return string(raw)
	}
	clean := func(i int) string {
		return []string{"", "vpc-0a1b2c3d", "subnet-0e1f2a3b", "ami-0c55b159cbfafe1f0", "t3.micro", "eu-west-1"}[i]
	}
	dirtyBastion := awsBastion(bastionConfig(h))
	dirtyBastion.Name, dirtyBastion.Namespace = h(6), h(7)
	dirtyBastion.Spec.UserData = []byte(h(8))
	dirtyBastion.Spec.Ingress[0].IPBlock.CIDR, dirtyBastion.Spec.Ingress[1].IPBlock.CIDR = h(0), h(2)+":"

	for _, c := range []struct {
		name         string
		kind         templates.Kind
		specType     string
		clean, dirty templates.KindObject
		want         map[string]any
	}{
		{"dnsrecord", templates.KindDNSRecord, "aws-route53", cleanRecord, dirtyRecord, map[string]any{
			"zone_id": h(1), "region": h(2), "record_name": h(5), "record_type": h(6), "record_values": []any{h(7), h(8)}}},
		{"backupbucket", templates.KindBackupBucket, "aws", awsBackupBucket(immutability("96h", "compliance")), dirtyBucket, map[string]any{
			"bucket_name": h(5), "region": h(6), "object_lock_mode": strings.ToUpper(h(4))}},
		{"backupentry", templates.KindBackupEntry, "aws", awsBackupEntry("shoot--dev--prod--1b2c3d4e"), dirtyEntry, map[string]any{
			"prefix": h(5) + "/", "bucket_name": h(2), "region": h(8)}},
		{"bastion", templates.KindBastion, "aws", awsBastion(bastionConfig(clean)), dirtyBastion, map[string]any{
			"vpc_id": h(1), "subnet_id": h(2), "image_id": h(3), "instance_type": h(4), "region": h(5),
			"bastion_name": h(6), "cluster_name": h(7), "user_data": base64.StdEncoding.EncodeToString([]byte(h(8))),
			"ingress_cidrs": []any{h(0), h(2) + ":"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			k := awsKind(t, r, c.kind, c.specType)
			want, err := k.RenderUnvalidated(templates.KindInput{Object: c.clean})
			g.Expect(err).NotTo(HaveOccurred())
			got, err := k.RenderUnvalidated(templates.KindInput{Object: c.dirty})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sortedKeys(got.Files)).To(Equal(sortedKeys(want.Files)))
			for name, text := range want.Files {
				g.Expect(got.Files[name]).To(Equal(text), "the object's strings changed %s", name)
			}
			tfvars := awsTFVars(t, got)
			for key, value := range c.want {
				g.Expect(tfvars).To(HaveKeyWithValue(key, value))
			}
		})
	}

	t.Run("validated record", func(t *testing.T) {
		g := NewWithT(t)
		k := awsKind(t, r, templates.KindDNSRecord, "aws-route53")
		record := awsDNSRecord()
		record.Spec.Name = `x"}${file("/etc/passwd")}%{endif}.example.com`
		_, err := k.Render(templates.KindInput{Object: record})
		g.Expect(err).To(MatchError(ContainSubstring("spec.name: Invalid value")), "a name that is no domain name is refused before it renders")
		record.Spec.Name = "_acme-challenge.API.example.com."
		out, err := k.Render(templates.KindInput{Object: record})
		g.Expect(err).NotTo(HaveOccurred())
		for name, text := range out.Files {
			g.Expect(text).NotTo(ContainSubstring("example.com"), name)
		}
		g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("record_name", record.Spec.Name))
	})
}
