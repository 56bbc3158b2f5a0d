package purge

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"

	"github.com/terraseed/terraseed/terraform/internal/s3test"
)

// spec is the purge of prefix in the server's bucket, with the credentials in the
// variables an aws BackupEntry's run has them in.
func spec(s *s3test.Server, prefix string) *Spec {
	return &Spec{Kind: KindS3, Bucket: s.Bucket, Prefix: prefix, Region: s3test.Region, Env: Env{
		AccessKeyID: "AWS_ACCESS_KEY_ID", SecretAccessKey: "AWS_SECRET_ACCESS_KEY", Endpoint: "TF_VAR_endpoint",
		WebIdentityTokenFile: "TF_VAR_web_identity_token_file", RoleARN: "TF_VAR_role_arn",
	}}
}

func env(s *s3test.Server) []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s3test.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + s3test.SecretAccessKey, "TF_VAR_endpoint=" + s.URL}
}

// OutsideKeys are keys around the entry's prefix "entry/" that are not under it: another
// entry whose name starts the same, a key that is the prefix without its slash, and others.
var outsideKeys = []string{"entry-2/v1/full-1", "entry-2/v1/incr-1", "entry", "entry.tar", "entryx/full", "other/entry/full", "a/entry/b"}

func TestPurgeS3DeletesEveryVersionAndDeleteMarkerUnderThePrefixAndNothingElse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := s3test.New(t, "backups")
	// 1,000 objects under the prefix, with one to three versions each, every fourth
	// deleted (a delete marker on top) and every seventh written again after that.
	work := errgroup.Group{}
	work.SetLimit(8)
	for i := range 1000 {
		key := fmt.Sprintf("entry/v2/%s-%04d", []string{"full", "incr", "chunk"}[i%3], i)
		work.Go(func() error {
			if err := s.Write(ctx, key, 1+i%3, i%4 == 0); err != nil {
				return err
			}
			if i%7 == 0 {
				return s.Write(ctx, key, 1, false)
			}
			return nil
		})
	}
	for _, key := range outsideKeys {
		work.Go(func() error { return s.Write(ctx, key, 2, key == "entry-2/v1/incr-1") })
	}
	g.Expect(work.Wait()).To(Succeed())
	before, markers := s.Versions(g)
	g.Expect(markers).To(BeNumerically(">", 250))
	inside, outside := s3test.Split(before, "entry/")
	g.Expect(len(inside)).To(BeNumerically(">", 2000), "several versions and delete markers per object")
	g.Expect(outside).To(HaveLen(2*len(outsideKeys) + 1))

	started := time.Now()
	result, err := Run(ctx, spec(s, "entry/"), env(s))
	elapsed := time.Since(started)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("purged 1,000 objects (%d versions and delete markers) in %s", len(inside), elapsed.Round(time.Millisecond))

	after, _ := s.Versions(g)
	g.Expect(after).To(Equal(outside), "every version and delete marker under entry/ is gone, and every other one is kept")
	g.Expect(result).To(Equal(Result{Deleted: len(inside)}))

	// Idempotent: a purge run again, as a retried deletion runs it, finds nothing to do.
	result, err = Run(ctx, spec(s, "entry/"), env(s))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(Result{}))
	again, _ := s.Versions(g)
	g.Expect(again).To(Equal(outside))
}

func TestPurgeS3FailsWhereTheServerRefusesAndKeepsTheObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := s3test.New(t, "backups")
	g.Expect(s.Write(ctx, "entry/full", 2, false)).To(Succeed())
	wrong := spec(s, "entry/")
	wrong.Bucket = "no-such-bucket"
	_, err := Run(ctx, wrong, env(s))
	g.Expect(err).To(MatchError(ContainSubstring("s3://no-such-bucket/entry/")))
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchBucket")))
	after, _ := s.Versions(g)
	g.Expect(after).To(HaveLen(2))
}

func TestPurgeRefusesAPrefixThatNamesMoreThanTheEntry(t *testing.T) {
	for prefix, field := range map[string]string{"": "prefix", "/": "prefix", "entry": `"entry" must end with "/"`} {
		t.Run(prefix, func(t *testing.T) {
			g := NewWithT(t)
			s := &Spec{Kind: KindS3, Bucket: "backups", Prefix: prefix, Region: "eu-west-1"}
			_, err := Run(context.Background(), s, nil)
			g.Expect(err).To(MatchError(ErrInvalid))
			g.Expect(err).To(MatchError(ContainSubstring(field)))
		})
	}
}

func TestPurgeWithoutCredentialsFailsBeforeAnyRequest(t *testing.T) {
	g := NewWithT(t)
	s := &Spec{Kind: KindS3, Bucket: "backups", Prefix: "entry/", Region: "eu-west-1", Env: Env{AccessKeyID: "AWS_ACCESS_KEY_ID", SecretAccessKey: "AWS_SECRET_ACCESS_KEY", Endpoint: "TF_VAR_endpoint"}}
	_, err := Run(context.Background(), s, []string{"TF_VAR_endpoint=http://127.0.0.1:1", "AWS_ACCESS_KEY_ID=x"})
	g.Expect(err).To(MatchError(ErrNoCredentials))
}

func TestPurgeParseNamesTheField(t *testing.T) {
	g := NewWithT(t)
	_, err := Parse([]byte(`{"kind":"gcs","bucket":"b","prefix":"e/","region":"r"}`))
	g.Expect(err).To(MatchError(ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring("kind: \"gcs\"")))
	_, err = Parse([]byte(`{"kind":"s3","prefix":"e/","region":"r"}`))
	g.Expect(err).To(MatchError(ContainSubstring("bucket: must not be empty")))
	s, err := Parse([]byte(`{"kind":"s3","bucket":"b","prefix":"e/","region":"r","env":{"accessKeyID":"A"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Env.AccessKeyID).To(Equal("A"))
}

// The purge reads the run's environment only: the controller's process, which runs the
// local executor's runs, has an AWS profile, an endpoint and keys of its own.
func TestPurgeReadsNothingOfTheProcessEnvironment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := s3test.New(t, "backups")
	g.Expect(s.Write(ctx, "entry/full", 2, true)).To(Succeed())
	t.Setenv("AWS_PROFILE", "controller")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	t.Setenv("AWS_ACCESS_KEY_ID", "controller-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "controller-secret")
	t.Setenv("AWS_REGION", "us-east-2")

	_, err := Run(ctx, spec(s, "entry/"), []string{"TF_VAR_endpoint=" + s.URL})
	g.Expect(err).To(MatchError(ErrNoCredentials), "never the process's keys")
	result, err := Run(ctx, spec(s, "entry/"), env(s))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(Result{Deleted: 3}))
}
