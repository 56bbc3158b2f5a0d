package templates_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/purge"
)

// An aws BackupEntry renders the purge of its prefix, "<entry name>/", in its bucket, with
// the run's variables of the Secret's kind of credentials; a source entry, and every
// other kind, render none.
func TestAWSBackupEntryPurgeNamesItsPrefixAndTheRunsCredentials(t *testing.T) {
	r := registry(t)
	entry := awsKind(t, r, templates.KindBackupEntry, "aws")
	for _, c := range []struct {
		name             string
		workloadIdentity bool
		env              purge.Env
	}{
		{"static keys", false, purge.Env{AccessKeyID: "AWS_ACCESS_KEY_ID", SecretAccessKey: "AWS_SECRET_ACCESS_KEY", Endpoint: "TF_VAR_endpoint"}},
		{"workload identity", true, purge.Env{Endpoint: "TF_VAR_endpoint", WebIdentityTokenFile: "TF_VAR_web_identity_token_file", RoleARN: "TF_VAR_role_arn"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := entry.Render(templates.KindInput{Object: awsBackupEntry("shoot--dev--prod--1b2c3d4e"), WorkloadIdentity: c.workloadIdentity})
			g.Expect(err).NotTo(HaveOccurred())
			spec, err := purge.Parse([]byte(out.Purge))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(*spec).To(Equal(purge.Spec{Kind: purge.KindS3, Bucket: awsBucketName, Prefix: "shoot--dev--prod--1b2c3d4e/", Region: "eu-west-1", Env: c.env}))
		})
	}
	t.Run("source entry", func(t *testing.T) {
		g := NewWithT(t)
		out, err := entry.Render(templates.KindInput{Object: awsBackupEntry("source-shoot--dev--prod--1b2c3d4e")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Purge).To(BeEmpty(), "a source entry's deletion leaves the shoot's backups")
	})
	t.Run("other kinds", func(t *testing.T) {
		g := NewWithT(t)
		bucket := awsKind(t, r, templates.KindBackupBucket, "aws")
		out, err := bucket.Render(templates.KindInput{Object: awsBackupBucket("")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Purge).To(BeEmpty())
		g.Expect(bucket.Manifest.Purge).To(BeNil())
	})
}

// The aws bucket expires what an entry's purge tagged because an object lock kept it.
func TestAWSBucketExpiresWhatAPurgeTagged(t *testing.T) {
	g := NewWithT(t)
	bucket := awsKind(t, registry(t), templates.KindBackupBucket, "aws")
	out, err := bucket.Render(templates.KindInput{Object: awsBackupBucket("")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Files["main.tf"]).To(MatchRegexp(`(?s)filter \{\s+tag \{\s+key\s+= "` + purge.ExpiryTagKey + `"\s+value = "` + purge.ExpiryTagValue + `"\s+\}\s+\}\s+expiration \{\s+days = 1\s+\}\s+noncurrent_version_expiration \{\s+noncurrent_days = 1`))
}

const purgeEntryTemplate = `resource "terraform_data" "entry" {
  input = {{ tfvar "bucket" .object.spec.bucketName }}
}
`

// Each mistake in a purge declaration fails the provider's load naming the field, and a
// prefix that renders to more than the entry's fails its render.
func TestPurgeDeclarationsAreChecked(t *testing.T) {
	valid := `type: fifth
credentials:
  - {key: accessKeyID, env: AWS_ACCESS_KEY_ID}
  - {key: secretAccessKey, env: AWS_SECRET_ACCESS_KEY}
resources: [terraform_data]
importIDs: {terraform_data: "-"}
status:
  providerStatus: {apiVersion: fifth.example.com/v1alpha1, kind: InfrastructureStatus, fields: {}}
kinds:
  backupentry:
    resources: [terraform_data]
    importIDs: {terraform_data: "-"}
    purge:
      kind: s3
      bucket: "{{ .object.spec.bucketName }}"
      prefix: "{{ .object.metadata.name }}/"
      region: "{{ .object.spec.region }}"
      credentials: {accessKeyID: accessKeyID, secretAccessKey: secretAccessKey}
`
	load := func(t *testing.T, manifest string) (*templates.Registry, error) {
		return templates.NewRegistry(writeProvider(t, map[string]string{
			"provider.yaml": manifest, "schema.json": `{"type": "object"}`, "main.tf.tpl": `resource "terraform_data" "x" {}`,
			"backupentry/main.tf.tpl": purgeEntryTemplate, "dnsrecord/main.tf.tpl": kindTemplate,
		}))
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"another kind", "backupentry:", "dnsrecord:", "kinds.dnsrecord.purge: only a backupentry purges"},
		{"unknown kind of purge", "kind: s3", "kind: gcs", `kinds.backupentry.purge.kind: "gcs" is not a kind of purge`},
		{"no prefix", `prefix: "{{ .object.metadata.name }}/"`, "", "kinds.backupentry.purge.prefix: must not be empty"},
		{"broken template", `region: "{{ .object.spec.region }}"`, `region: "{{ .object "`, "kinds.backupentry.purge.region: template"},
		{"unknown credential", "secretAccessKey: secretAccessKey}", "secretAccessKey: password}", `kinds.backupentry.purge.credentials.secretAccessKey: "password" names no credential`},
		{"half a key", "{accessKeyID: accessKeyID, secretAccessKey: secretAccessKey}", "{accessKeyID: accessKeyID}", "kinds.backupentry.purge.credentials: name accessKeyID and secretAccessKey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := load(t, replaceOnce(t, valid, c.old, c.new))
			var perr *templates.ProviderError
			g.Expect(errors.As(err, &perr)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(c.want))
		})
	}
	t.Run("prefix without its slash", func(t *testing.T) {
		g := NewWithT(t)
		r, err := load(t, replaceOnce(t, valid, `"{{ .object.metadata.name }}/"`, `"{{ .object.metadata.name }}"`))
		g.Expect(err).NotTo(HaveOccurred())
		k, err := r.Kind(templates.KindBackupEntry, "fifth")
		g.Expect(err).NotTo(HaveOccurred())
		entry := backupEntry("fifth")
		_, err = k.Render(templates.KindInput{Object: entry})
		g.Expect(err).To(MatchError(purge.ErrInvalid))
		g.Expect(err).To(MatchError(ContainSubstring(`kinds.backupentry.purge`)))
		g.Expect(err).To(MatchError(ContainSubstring(`must end with "/"`)))
	})
	t.Run("valid", func(t *testing.T) {
		g := NewWithT(t)
		r, err := load(t, valid)
		g.Expect(err).NotTo(HaveOccurred())
		k, err := r.Kind(templates.KindBackupEntry, "fifth")
		g.Expect(err).NotTo(HaveOccurred())
		entry := backupEntry("fifth")
		out, err := k.Render(templates.KindInput{Object: entry})
		g.Expect(err).NotTo(HaveOccurred())
		var spec purge.Spec
		g.Expect(json.Unmarshal([]byte(out.Purge), &spec)).To(Succeed())
		g.Expect(spec.Prefix).To(Equal(entry.Name + "/"))
		g.Expect(spec.Env).To(Equal(purge.Env{AccessKeyID: "AWS_ACCESS_KEY_ID", SecretAccessKey: "AWS_SECRET_ACCESS_KEY"}))
	})
}

func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("%q not in the manifest", old)
	}
	return strings.Replace(s, old, new, 1)
}
