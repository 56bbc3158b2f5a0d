package purge

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"
)

// s3Server is an S3 API server of the test's own, in memory, served over HTTP, with one
// versioned bucket.
type s3Server struct {
	backend *s3mem.Backend
	url     string
	bucket  string
	client  *s3.Client
}

func newS3Server(t *testing.T) *s3Server {
	t.Helper()
	g := NewWithT(t)
	backend := s3mem.New()
	server := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(server.Close)
	s := &s3Server{backend: backend, url: server.URL, bucket: "backups"}
	c, err := newS3Client(context.Background(), s.spec("unused/"), environment(s.env()))
	g.Expect(err).NotTo(HaveOccurred())
	s.client = c
	_, err = c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(s.bucket)})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.PutBucketVersioning(context.Background(), &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(s.bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	g.Expect(err).NotTo(HaveOccurred())
	return s
}

// spec is the purge of prefix in the server's bucket, with the credentials in the
// variables an aws BackupEntry's run has them in.
func (s *s3Server) spec(prefix string) *Spec {
	return &Spec{Kind: KindS3, Bucket: s.bucket, Prefix: prefix, Region: "eu-west-1", Env: Env{
		AccessKeyID: "AWS_ACCESS_KEY_ID", SecretAccessKey: "AWS_SECRET_ACCESS_KEY", Endpoint: "TF_VAR_endpoint",
		WebIdentityTokenFile: "TF_VAR_web_identity_token_file", RoleARN: "TF_VAR_role_arn",
	}}
}

func (s *s3Server) env() []string {
	return []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "TF_VAR_endpoint=" + s.url}
}

// write gives key versions versions, each a put, and a delete marker on top when deleted.
func (s *s3Server) write(ctx context.Context, key string, versions int, deleted bool) error {
	for i := range versions {
		if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: strings.NewReader(fmt.Sprintf("%s v%d", key, i))}); err != nil {
			return err
		}
	}
	if deleted {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		return err
	}
	return nil
}

// versions lists every version and delete marker of the bucket as the server holds
// them, "key version" each, and counts the delete markers.
func (s *s3Server) versions(g Gomega) ([]string, int) {
	list, err := s.backend.ListBucketVersions(s.bucket, &gofakes3.Prefix{}, &gofakes3.ListBucketVersionsPage{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.IsTruncated).To(BeFalse())
	var all []string
	markers := 0
	for _, v := range list.Versions {
		switch v := v.(type) {
		case *gofakes3.Version:
			all = append(all, v.Key+" "+string(v.VersionID))
		case *gofakes3.DeleteMarker:
			all = append(all, v.Key+" "+string(v.VersionID))
			markers++
		}
	}
	slices.Sort(all)
	return all, markers
}

// The keys around the entry's prefix "entry/" that are not under it: another entry whose
// name starts the same, a key that is the prefix without its slash, and others.
var outsideKeys = []string{"entry-2/v1/full-1", "entry-2/v1/incr-1", "entry", "entry.tar", "entryx/full", "other/entry/full", "a/entry/b"}

func TestPurgeS3DeletesEveryVersionAndDeleteMarkerUnderThePrefixAndNothingElse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newS3Server(t)
	// 1,000 objects under the prefix, with one to three versions each, every fourth
	// deleted (a delete marker on top) and every seventh written again after that.
	written, work := 0, errgroup.Group{}
	work.SetLimit(8)
	for i := range 1000 {
		key := fmt.Sprintf("entry/v2/%s-%04d", []string{"full", "incr", "chunk"}[i%3], i)
		written += 1 + i%3
		work.Go(func() error {
			if err := s.write(ctx, key, 1+i%3, i%4 == 0); err != nil {
				return err
			}
			if i%7 == 0 {
				return s.write(ctx, key, 1, false)
			}
			return nil
		})
	}
	for _, key := range outsideKeys {
		work.Go(func() error { return s.write(ctx, key, 2, key == "entry-2/v1/incr-1") })
	}
	g.Expect(work.Wait()).To(Succeed())
	before, markers := s.versions(g)
	g.Expect(markers).To(BeNumerically(">=", 250))
	var inside, outside []string
	for _, v := range before {
		if strings.HasPrefix(v, "entry/") {
			inside = append(inside, v)
		} else {
			outside = append(outside, v)
		}
	}
	g.Expect(len(inside)).To(BeNumerically(">", 2000), "several versions and delete markers per object")

	started := time.Now()
	result, err := Run(ctx, s.spec("entry/"), s.env())
	elapsed := time.Since(started)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("purged 1,000 objects (%d versions and delete markers) in %s", len(inside), elapsed.Round(time.Millisecond))

	after, _ := s.versions(g)
	g.Expect(after).To(Equal(outside), "every version and delete marker under entry/ is gone, and every other one is kept")
	g.Expect(result).To(Equal(Result{Deleted: len(inside)}))

	// Idempotent: a purge run again, as a retried deletion runs it, finds nothing to do.
	result, err = Run(ctx, s.spec("entry/"), s.env())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(Result{}))
	again, _ := s.versions(g)
	g.Expect(again).To(Equal(outside))
}

func TestPurgeS3FailsWhereTheServerRefusesAndKeepsTheObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newS3Server(t)
	g.Expect(s.write(ctx, "entry/full", 2, false)).To(Succeed())
	spec := s.spec("entry/")
	spec.Bucket = "no-such-bucket"
	_, err := Run(ctx, spec, s.env())
	g.Expect(err).To(MatchError(ContainSubstring("s3://no-such-bucket/entry/")))
	after, _ := s.versions(g)
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
	s := (&s3Server{bucket: "backups"}).spec("entry/")
	_, err := Run(context.Background(), s, []string{"TF_VAR_endpoint=http://127.0.0.1:1"})
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
