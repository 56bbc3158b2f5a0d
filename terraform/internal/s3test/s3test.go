// Package s3test starts an S3 API server for a test: gofakes3 in memory over HTTP, with
// one versioned bucket.
package s3test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/onsi/gomega"
)

// The credentials the server is given; it takes any.
const (
	AccessKeyID     = "AKIATEST"
	SecretAccessKey = "test-secret"
	Region          = "eu-west-1"
)

// Server is an S3 API server of the test's own with one versioned bucket.
type Server struct {
	URL    string
	Bucket string
	// Client writes to the server as a user of the bucket does.
	Client  *s3.Client
	backend *s3mem.Backend
}

// New starts a server, stopped when the test ends, with the versioned bucket named bucket.
func New(t testing.TB, bucket string) *Server {
	t.Helper()
	backend := s3mem.New()
	server := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(server.Close)
	return NewAt(t, server.URL, backend, bucket)
}

// NewAt is New for a server the test started at url, which serves backend's objects
// (gofakes3's, with what the test puts in front of it).
func NewAt(t testing.TB, url string, backend *s3mem.Backend, bucket string) *Server {
	t.Helper()
	g := gomega.NewWithT(t)
	s := &Server{URL: url, Bucket: bucket, backend: backend}
	s.Client = s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(url),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
	})
	ctx := context.Background()
	_, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = s.Client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return s
}

// Write gives key versions versions, each a put, and a delete marker on top when deleted.
func (s *Server) Write(ctx context.Context, key string, versions int, deleted bool) error {
	for i := range versions {
		if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: strings.NewReader(fmt.Sprintf("%s v%d", key, i))}); err != nil {
			return err
		}
	}
	if deleted {
		_, err := s.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
		return err
	}
	return nil
}

// Versions lists every version and delete marker of the bucket as the server holds
// them, "key version" each, sorted, and counts the delete markers.
func (s *Server) Versions(g gomega.Gomega) ([]string, int) {
	list, err := s.backend.ListBucketVersions(s.Bucket, &gofakes3.Prefix{}, &gofakes3.ListBucketVersionsPage{})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(list.IsTruncated).To(gomega.BeFalse())
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

// Split parts versions ("key version") into those under prefix and the others.
func Split(versions []string, prefix string) (inside, outside []string) {
	for _, v := range versions {
		if strings.HasPrefix(v, prefix) {
			inside = append(inside, v)
		} else {
			outside = append(outside, v)
		}
	}
	return inside, outside
}
