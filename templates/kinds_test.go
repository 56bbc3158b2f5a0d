package templates_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

func dnsRecord(providerType string) *extensionsv1alpha1.DNSRecord {
	return &extensionsv1alpha1.DNSRecord{
		ObjectMeta: metav1.ObjectMeta{Name: "foobar-external", Namespace: "shoot--foobar--local"},
		Spec: extensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			SecretRef:   corev1.SecretReference{Name: "dns", Namespace: "shoot--foobar--local"},
			Name:        "api.foobar.example.com",
			RecordType:  extensionsv1alpha1.DNSRecordTypeA,
			Values:      []string{"192.0.2.10", "192.0.2.11"},
		},
	}
}

func backupBucket(providerType string) *extensionsv1alpha1.BackupBucket {
	return &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: "8c3e6e5b-5f1a-4c3e-9d43-2c5b0f0e6a11"},
		Spec: extensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			Region:      "local",
			SecretRef:   corev1.SecretReference{Name: "backup", Namespace: "garden"},
		},
	}
}

func backupEntry(providerType string) *extensionsv1alpha1.BackupEntry {
	return &extensionsv1alpha1.BackupEntry{
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--foobar--local--1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			Region:      "local",
			BucketName:  "8c3e6e5b-5f1a-4c3e-9d43-2c5b0f0e6a11",
			SecretRef:   corev1.SecretReference{Name: "backup", Namespace: "garden"},
		},
	}
}

func bastion(providerType string) *extensionsv1alpha1.Bastion {
	return &extensionsv1alpha1.Bastion{
		ObjectMeta: metav1.ObjectMeta{Name: "cli-abcd1234", Namespace: "shoot--foobar--local"},
		Spec: extensionsv1alpha1.BastionSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: providerType},
			UserData:    []byte("#!/bin/sh\necho ssh-ed25519 AAAA >> /home/gardener/.ssh/authorized_keys\n"),
			Ingress: []extensionsv1alpha1.BastionIngressPolicy{
				{IPBlock: networkingv1.IPBlock{CIDR: "203.0.113.0/24"}},
				{IPBlock: networkingv1.IPBlock{CIDR: "2001:db8::/32"}},
			},
		},
	}
}

// kindObjects are one valid object of every kind, of providerType.
func kindObjects(providerType string) map[templates.Kind]templates.KindObject {
	return map[templates.Kind]templates.KindObject{
		templates.KindDNSRecord:    dnsRecord(providerType),
		templates.KindBackupBucket: backupBucket(providerType),
		templates.KindBackupEntry:  backupEntry(providerType),
		templates.KindBastion:      bastion(providerType),
		kindExposure:               exposure(providerType, ""),
	}
}

func TestLocalServesEveryKind(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	p, err := r.Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Kinds()).To(Equal(templates.Kinds))
	for kind, obj := range kindObjects("local") {
		k, err := r.Kind(kind, "local")
		g.Expect(err).NotTo(HaveOccurred(), string(kind))
		out, err := k.Render(templates.KindInput{Object: obj})
		g.Expect(err).NotTo(HaveOccurred(), string(kind))
		g.Expect(out.Files).To(HaveKey("main.tf"), string(kind))
		g.Expect(out.Files["main.tf"]).To(ContainSubstring(`provider "kubectl"`), "%s reaches the cluster through the provider's helper", kind)
		g.Expect(out.Files["variables.tf"]).To(ContainSubstring(`variable "kubeconfig"`), "%s has the provider's credentials", kind)
	}
}

// A provider that ships no directory for a kind does not serve it: the registry names the
// types it does serve, and a kind directory renders only for its own kind of object.
func TestAKindWithoutTemplatesIsNotServed(t *testing.T) {
	g := NewWithT(t)
	r := registry(t, filepath.Join("testdata", "providers"))
	third, err := r.Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(third.Kinds()).To(BeEmpty())
	_, err = third.Kind(templates.KindDNSRecord)
	var noKind *templates.NoKindError
	g.Expect(errors.As(err, &noKind)).To(BeTrue(), "got %v", err)

	_, err = r.Kind(templates.KindBastion, "third")
	var unknown *templates.UnknownKindTypeError
	g.Expect(errors.As(err, &unknown)).To(BeTrue(), "got %v", err)
	g.Expect(unknown.Known).To(ContainElement("local"))
	g.Expect(err).To(MatchError(`no provider serves bastion type "third" (known: aws, local)`))
	g.Expect(unknown.Known).NotTo(ContainElement("third"))

	k, err := r.Kind(templates.KindDNSRecord, "local")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = k.Render(templates.KindInput{Object: bastion("local")})
	g.Expect(err).To(MatchError(ContainSubstring("a dnsrecord renders from its own object")))
}

// writeProvider writes a provider directory: files by path, provider.yaml among them.
func writeProvider(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const kindProviderYAML = `type: fourth
credentials:
  - key: token
    variable: token
    aliases: [TOKEN]
resources: [terraform_data]
importIDs:
  terraform_data: "-"
status:
  providerStatus: {apiVersion: fourth.example.com/v1alpha1, kind: InfrastructureStatus, fields: {}}
`

const kindTemplate = `resource "terraform_data" "record" {
  input = {{ tfvar "values" .object.spec.values }}
}

output "zone" {
  value = {{ tfvar "zone" .object.spec.name }}
}
`

// backupKinds is a provider serving a backupbucket and a backupentry, each with what is
// given declared besides its resources.
func backupKinds(bucket, entry string) string {
	return kindProviderYAML + `kinds:
  backupbucket:
    resources: [terraform_data]
    importIDs: {terraform_data: "-"}
    ` + bucket + `
  backupentry:
    resources: [terraform_data]
    importIDs: {terraform_data: "-"}
    ` + entry + `
`
}

var backupDirs = map[string]string{"backupbucket/main.tf.tpl": kindTemplate, "backupentry/main.tf.tpl": kindTemplate}

// A kind provider.yaml declares has its directory, and each mistake in a declaration
// fails the provider's load naming the field.
func TestKindDeclarationsAreChecked(t *testing.T) {
	valid := kindProviderYAML + `kinds:
  dnsrecord:
    resources: [terraform_data]
    importIDs: {terraform_data: "-"}
    status: {fields: {zone: zone}}
`
	for _, c := range []struct {
		name     string
		manifest string
		files    map[string]string
		want     string
	}{
		{"no directory", valid, nil, "kinds.dnsrecord: the provider has no dnsrecord/ directory"},
		{"undeclared resource type", kindProviderYAML, map[string]string{"dnsrecord/main.tf.tpl": kindTemplate + `resource "kubectl_manifest" "x" {}`}, "kinds.dnsrecord.importIDs: resource type kubectl_manifest has no import ID"},
		{"unknown kind", kindProviderYAML + "kinds:\n  worker: {}\n", nil, "kinds.worker: no such kind"},
		{"status field of another kind", strings.Replace(valid, "{zone: zone}", "{ingress.ip: zone}", 1), map[string]string{"dnsrecord/main.tf.tpl": kindTemplate}, `status.fields: "ingress.ip" is not a status field outputs may set for a dnsrecord (they are: zone)`},
		{"generated secret of a record", strings.Replace(valid, "{fields: {zone: zone}}", "{generatedSecret: {a: zone}}", 1), map[string]string{"dnsrecord/main.tf.tpl": kindTemplate}, "status.generatedSecret: only a backupbucket has a generated Secret"},
		{"no import ID", strings.Replace(valid, "resources: [terraform_data]\n    importIDs: {terraform_data: \"-\"}", "resources: [kubectl_manifest]", 1), map[string]string{"dnsrecord/main.tf.tpl": kindTemplate}, "kinds.dnsrecord.importIDs: resource type kubectl_manifest has no import ID"},
		{"protected and not declared", strings.Replace(valid, "resources: [terraform_data]\n    importIDs", "resources: [terraform_data]\n    protectedResources: [null_resource]\n    importIDs", 1), map[string]string{"dnsrecord/main.tf.tpl": kindTemplate}, `kinds.dnsrecord.protectedResources[0]: "null_resource" is not a resource type declared in resources`},
		{"broken template", valid, map[string]string{"dnsrecord/main.tf.tpl": "{{ .object "}, "dnsrecord: template: main.tf.tpl"},
		{"etcd-backup keys of a record", strings.Replace(valid, "status: {fields: {zone: zone}}", "etcdBackupSecret: {region: zone}", 1), map[string]string{"dnsrecord/main.tf.tpl": kindTemplate}, "kinds.dnsrecord.etcdBackupSecret: only a backupentry writes the Secret etcd-backup"},
		{"etcd-backup's bucketName from an output", backupKinds("", "etcdBackupSecret: {bucketName: zone}"), backupDirs, `kinds.backupentry.etcdBackupSecret: "bucketName" is written from the BackupEntry's spec.bucketName`},
		{"etcd-backup key that is no Secret key", backupKinds("", "etcdBackupSecret: {\"a b\": zone}"), backupDirs, `kinds.backupentry.etcdBackupSecret: "a b" is not a Secret key`},
		{"generated Secret without the entries' credentials", backupKinds("status: {generatedSecret: {bucketName: zone}}", ""), backupDirs,
			`kinds.backupbucket.status.generatedSecret: lacks token, which the credentials of provider "fourth"'s backupentry require`},
		{"alias equal to its key", strings.Replace(valid, "aliases: [TOKEN]", "aliases: [token]", 1), map[string]string{"dnsrecord/main.tf.tpl": kindTemplate}, "credentials[0].aliases: each must be a Secret key other than key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			files := map[string]string{"provider.yaml": c.manifest, "schema.json": `{"type": "object"}`, "main.tf.tpl": `resource "terraform_data" "x" {}`}
			for name, content := range c.files {
				files[name] = content
			}
			_, err := templates.NewRegistry(writeProvider(t, files))
			var perr *templates.ProviderError
			g.Expect(errors.As(err, &perr)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(c.want))
		})
	}
}

// A kind of a provider added by directory alone: it renders with the provider's helpers,
// reports its status from outputs, and reads its credentials under either key naming.
func TestAKindIsAddedByDirectoryAlone(t *testing.T) {
	g := NewWithT(t)
	dir := writeProvider(t, map[string]string{
		"provider.yaml": kindProviderYAML + `kinds:
  dnsrecord:
    types: [fourth-dns]
    resources: [terraform_data]
    importIDs: {terraform_data: "-"}
    status:
      providerStatus: {apiVersion: fourth.example.com/v1alpha1, kind: DNSRecordStatus, fields: {record.zone: zone}}
      fields: {zone: zone}
`,
		"schema.json":           `{"type": "object"}`,
		"main.tf.tpl":           `resource "terraform_data" "x" {}`,
		"_helpers.tpl":          `{{ define "fourth.header" }}# {{ .kind }} of {{ .object.metadata.namespace }}{{ end }}`,
		"dnsrecord/main.tf.tpl": "{{ template \"fourth.header\" . }}\n" + kindTemplate,
		"dnsrecord/schema.json": `{"type": "object", "properties": {"weight": {"type": "integer"}}, "additionalProperties": false}`,
	})
	r := registry(t, dir)
	g.Expect(r.KindTypes(templates.KindDNSRecord)).To(ContainElements("fourth-dns", "local"))
	k, err := r.Kind(templates.KindDNSRecord, "fourth-dns")
	g.Expect(err).NotTo(HaveOccurred())

	record := dnsRecord("fourth-dns")
	out, err := k.Render(templates.KindInput{Object: record})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Files["main.tf"]).To(HavePrefix("# dnsrecord of shoot--foobar--local\n"))
	var tfvars map[string]any
	g.Expect(json.Unmarshal(out.TFVarsJSON, &tfvars)).To(Succeed())
	g.Expect(tfvars).To(Equal(map[string]any{"values": []any{"192.0.2.10", "192.0.2.11"}, "zone": "api.foobar.example.com"}))

	_, err = k.Render(templates.KindInput{Object: dnsRecord("local")})
	g.Expect(err).To(MatchError(ContainSubstring(`spec.type: Unsupported value: "local": supported values: "fourth-dns"`)))
	record.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"weight": "heavy"}`)}
	_, err = k.Render(templates.KindInput{Object: record})
	var invalid *templates.ValidationError
	g.Expect(errors.As(err, &invalid)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("invalid fourth dnsrecord: providerConfig.weight"))

	status, err := k.Status(map[string]any{"zone": "Z123"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Fields).To(Equal(map[string]string{"zone": "Z123"}))
	g.Expect(string(status.ProviderStatus.Raw)).To(MatchJSON(`{"apiVersion":"fourth.example.com/v1alpha1","kind":"DNSRecordStatus","record":{"zone":"Z123"}}`))
	_, err = k.Status(map[string]any{"zone": 5})
	g.Expect(err).To(MatchError(ContainSubstring(`terraform output "zone" must be a string`)))
	_, err = k.Status(map[string]any{})
	g.Expect(err).To(MatchError(ContainSubstring(`terraform output "zone" is missing`)))

	env, err := k.Credentials(&corev1.Secret{Data: map[string][]byte{"TOKEN": []byte("t0k3n")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"TF_VAR_token": "t0k3n"}))
	env, err = k.Credentials(&corev1.Secret{Data: map[string][]byte{"token": []byte("own"), "TOKEN": []byte("alias")}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env).To(Equal(map[string]string{"TF_VAR_token": "own"}), "the key itself comes before its aliases")
	_, err = k.Credentials(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: "garden"}})
	g.Expect(err).To(MatchError(ContainSubstring("data[token]: Required value: the credentials secret garden/dns must hold this key or one of TOKEN")))

	// Another provider that claims the same type is refused: which would serve it?
	dup := writeProvider(t, map[string]string{
		"provider.yaml":         strings.Replace(string(mustRead(t, filepath.Join(dir, "provider.yaml"))), "type: fourth", "type: fifth", 1),
		"schema.json":           `{"type": "object"}`,
		"main.tf.tpl":           `resource "terraform_data" "x" {}`,
		"dnsrecord/main.tf.tpl": kindTemplate,
	})
	_, err = templates.NewRegistry(dir, dup)
	g.Expect(err).To(MatchError(ContainSubstring(`kinds.dnsrecord: type "fourth-dns" is served by provider "fourth"`)))
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Every bad field of a kind's object fails its render with an error naming the field.
func TestKindObjectsAreCheckedNamingTheField(t *testing.T) {
	r := registry(t)
	for _, c := range []struct {
		name   string
		kind   templates.Kind
		mutate func(templates.KindObject)
		want   string
	}{
		{"record type", templates.KindDNSRecord, func(o templates.KindObject) { o.(*extensionsv1alpha1.DNSRecord).Spec.RecordType = "MX" }, `spec.recordType: Unsupported value: "MX"`},
		{"A of IPv6", templates.KindDNSRecord, func(o templates.KindObject) { o.(*extensionsv1alpha1.DNSRecord).Spec.Values = []string{"2001:db8::1"} }, `spec.values[0]: Invalid value: "2001:db8::1": must be an IPv4 address`},
		{"AAAA of IPv4", templates.KindDNSRecord, func(o templates.KindObject) {
			o.(*extensionsv1alpha1.DNSRecord).Spec.RecordType = extensionsv1alpha1.DNSRecordTypeAAAA
		}, `spec.values[0]: Invalid value: "192.0.2.10": must be an IPv6 address`},
		{"CNAME of two", templates.KindDNSRecord, func(o templates.KindObject) {
			o.(*extensionsv1alpha1.DNSRecord).Spec.RecordType = extensionsv1alpha1.DNSRecordTypeCNAME
		}, `spec.values: Invalid value: ["192.0.2.10","192.0.2.11"]: a CNAME record has one value`},
		{"name", templates.KindDNSRecord, func(o templates.KindObject) { o.(*extensionsv1alpha1.DNSRecord).Spec.Name = "api.\"x\".example.com" }, `spec.name: Invalid value: "api.\"x\".example.com": must be a domain name`},
		{"CNAME value", templates.KindDNSRecord, func(o templates.KindObject) {
			o.(*extensionsv1alpha1.DNSRecord).Spec.RecordType = extensionsv1alpha1.DNSRecordTypeCNAME
			o.(*extensionsv1alpha1.DNSRecord).Spec.Values = []string{"lb..example.com"}
		}, `spec.values[0]: Invalid value: "lb..example.com": must be a domain name`},
		{"no secret", templates.KindDNSRecord, func(o templates.KindObject) { o.(*extensionsv1alpha1.DNSRecord).Spec.SecretRef.Name = "" }, "spec.secretRef.name: Required value"},
		{"no values", templates.KindDNSRecord, func(o templates.KindObject) { o.(*extensionsv1alpha1.DNSRecord).Spec.Values = nil }, "spec.values: Required value"},
		{"ttl", templates.KindDNSRecord, func(o templates.KindObject) { o.(*extensionsv1alpha1.DNSRecord).Spec.TTL = new(int64) }, "spec.ttl: Invalid value: 0: must be between 1 and 2147483647 seconds"},
		{"top-level name", templates.KindDNSRecord, func(o templates.KindObject) { o.(*extensionsv1alpha1.DNSRecord).Spec.Name = "localhost" }, `spec.name: Invalid value: "localhost": a record of a top-level name needs spec.zone`},
		{"providerConfig", templates.KindDNSRecord, func(o templates.KindObject) {
			o.(*extensionsv1alpha1.DNSRecord).Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"namespace": "Not_A_Namespace"}`)}
		}, "providerConfig.namespace"},
		{"no ingress", templates.KindBastion, func(o templates.KindObject) { o.(*extensionsv1alpha1.Bastion).Spec.Ingress = nil }, "spec.ingress: Required value"},
		{"ingress CIDR", templates.KindBastion, func(o templates.KindObject) {
			o.(*extensionsv1alpha1.Bastion).Spec.Ingress[1].IPBlock.CIDR = "203.0.113.7/24"
		}, `spec.ingress[1].ipBlock.cidr: Invalid value: "203.0.113.7/24": must be a CIDR without host bits`},
		{"no user data", templates.KindBastion, func(o templates.KindObject) { o.(*extensionsv1alpha1.Bastion).Spec.UserData = nil }, "spec.userData: Required value"},
		{"no bucket", templates.KindBackupEntry, func(o templates.KindObject) { o.(*extensionsv1alpha1.BackupEntry).Spec.BucketName = "" }, "spec.bucketName: Required value"},
		{"no region", templates.KindBackupBucket, func(o templates.KindObject) { o.(*extensionsv1alpha1.BackupBucket).Spec.Region = "" }, "spec.region: Required value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			k, err := r.Kind(c.kind, "local")
			g.Expect(err).NotTo(HaveOccurred())
			obj := kindObjects("local")[c.kind]
			c.mutate(obj)
			_, err = k.Render(templates.KindInput{Object: obj})
			var invalid *templates.ValidationError
			g.Expect(errors.As(err, &invalid)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(c.want))
			g.Expect(err.Error()).To(HavePrefix("invalid local " + string(c.kind) + ": "))
		})
	}
}

// What an object's owner writes reaches terraform as variables only: hostile text in
// every string of the spec never shows in the rendered HCL, and arrives in the tfvars.
func TestKindObjectsAreNeverHCL(t *testing.T) {
	r := registry(t)
	evil := hostile[5]
	objects := map[templates.Kind]templates.KindObject{}
	record := dnsRecord("local")
	record.Spec.Name = "a" + evil + ".example.com"
	record.Spec.Values = []string{evil}
	record.Spec.Zone = &evil
	objects[templates.KindDNSRecord] = record
	bucket := backupBucket("local")
	bucket.Name, bucket.Spec.Region = evil, evil
	objects[templates.KindBackupBucket] = bucket
	entry := backupEntry("local")
	entry.Name, entry.Spec.BucketName = evil, evil
	objects[templates.KindBackupEntry] = entry
	b := bastion("local")
	b.Namespace, b.Name = evil, evil
	b.Spec.UserData = []byte(evil)
	b.Spec.Ingress[0].IPBlock.CIDR = evil
	b.Spec.ProviderConfig = &runtime.RawExtension{Raw: mustJSON(t, map[string]string{"image": evil})}
	objects[templates.KindBastion] = b
	e := exposure("local", "")
	e.Namespace, e.Name = evil, evil
	e.Spec.Endpoints[0].NodeName, e.Spec.Endpoints[0].Addresses[1].Address = evil, evil
	objects[kindExposure] = e
	for kind, obj := range objects {
		t.Run(string(kind), func(t *testing.T) {
			g := NewWithT(t)
			k, err := r.Kind(kind, "local")
			g.Expect(err).NotTo(HaveOccurred())
			out, err := k.RenderUnvalidated(templates.KindInput{Object: obj})
			g.Expect(err).NotTo(HaveOccurred())
			for name, text := range out.Files {
				g.Expect(text).NotTo(ContainSubstring("evil"), "%s/%s holds the object's text", kind, name)
			}
			if kind == templates.KindBastion {
				// userData is bytes: JSON carries them as base64, and so does the Secret.
				g.Expect(string(out.TFVarsJSON)).To(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(evil))))
			}
			raw, _ := json.Marshal(evil)
			g.Expect(string(out.TFVarsJSON)).To(ContainSubstring(strings.Trim(string(raw), `"`)))
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A kind's directory alone serves the kind: provider.yaml declares only what the kind
// needs beyond it.
func TestAKindDirectoryAloneServesTheKind(t *testing.T) {
	g := NewWithT(t)
	dir := writeProvider(t, map[string]string{
		"provider.yaml":         kindProviderYAML,
		"schema.json":           `{"type": "object"}`,
		"main.tf.tpl":           `resource "terraform_data" "x" {}`,
		"dnsrecord/main.tf.tpl": kindTemplate,
	})
	k, err := registry(t, dir).Kind(templates.KindDNSRecord, "fourth")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = k.Render(templates.KindInput{Object: dnsRecord("fourth")})
	g.Expect(err).NotTo(HaveOccurred())
	status, err := k.Status(map[string]any{"zone": "example.com"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status.Fields).To(BeEmpty(), "no output is mapped")
	g.Expect(status.ProviderStatus).To(BeNil())
}

// A generated Secret that holds every key the entries' credentials require, under the key
// or one of its aliases, loads; so do the keys an entry adds to etcd-backup, read from
// the outputs as they are declared.
func TestGeneratedSecretWithTheEntriesCredentialsAndEtcdBackupKeysLoad(t *testing.T) {
	for _, generated := range []string{"{bucketName: zone, token: zone}", "{TOKEN: zone}"} {
		g := NewWithT(t)
		files := map[string]string{"provider.yaml": backupKinds("status: {generatedSecret: "+generated+"}", "etcdBackupSecret: {region: zone, endpoint: zone}"),
			"schema.json": `{"type": "object"}`, "main.tf.tpl": `resource "terraform_data" "x" {}`}
		maps.Copy(files, backupDirs)
		r, err := templates.NewRegistry(writeProvider(t, files))
		g.Expect(err).NotTo(HaveOccurred(), generated)
		k, err := r.Kind(templates.KindBackupEntry, "fourth")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k.Manifest.Outputs()).To(Equal([]string{"zone"}))
		data, err := k.EtcdBackupData(map[string]any{"zone": "eu-1"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(data).To(Equal(map[string][]byte{"region": []byte("eu-1"), "endpoint": []byte("eu-1")}))
		_, err = k.EtcdBackupData(map[string]any{"zone": 3})
		g.Expect(err).To(MatchError(ContainSubstring(`terraform output "zone" must be a string`)))
	}
}
