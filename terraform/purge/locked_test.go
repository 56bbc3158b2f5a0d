package purge

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/gomega"
	"golang.org/x/sync/errgroup"

	"github.com/terraseed/terraseed/terraform/internal/s3test"
)

// objectLock stands in front of gofakes3 for what it lacks: S3's object lock, a
// retention on some versions, which DeleteObjects refuses with AccessDenied, and the
// tagging of versions. Everything else is gofakes3's.
type objectLock struct {
	next     http.Handler
	mu       sync.Mutex
	retained map[string]time.Time
	// denied versions are refused with AccessDenied and no lock: a missing permission.
	denied map[string]bool
	tags   map[string]string
	// swallow answers every DeleteObjects with success and deletes nothing.
	swallow bool
}

func lockID(key, version string) string { return key + "\x00" + version }

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Objects []struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId,omitempty"`
	} `xml:"Object"`
	Quiet bool `xml:"Quiet"`
}

type deleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

type deleteResult struct {
	XMLName xml.Name      `xml:"DeleteResult"`
	Deleted []struct{}    `xml:"Deleted"`
	Errors  []deleteError `xml:"Error"`
}

func (l *objectLock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := strings.TrimPrefix(r.URL.Path, "/backups/")
	l.mu.Lock()
	until, locked := l.retained[lockID(key, q.Get("versionId"))]
	l.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && q.Has("delete"):
		l.deleteObjects(w, r)
	case r.Method == http.MethodGet && q.Has("retention") && locked:
		fmt.Fprintf(w, `<Retention><Mode>COMPLIANCE</Mode><RetainUntilDate>%s</RetainUntilDate></Retention>`, until.UTC().Format(time.RFC3339))
	case r.Method == http.MethodGet && (q.Has("retention") || q.Has("legal-hold")):
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `<Error><Code>NoSuchObjectLockConfiguration</Code><Message>none</Message></Error>`)
	case r.Method == http.MethodGet && q.Has("tagging"):
		fmt.Fprint(w, `<Tagging><TagSet><Tag><Key>kept</Key><Value>yes</Value></Tag></TagSet></Tagging>`)
	case r.Method == http.MethodPut && q.Has("tagging"):
		body, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.tags[lockID(key, q.Get("versionId"))] = string(body)
		l.mu.Unlock()
	default:
		l.next.ServeHTTP(w, r)
	}
}

// deleteObjects passes the versions no retention keeps to gofakes3, and answers
// AccessDenied for the others, as S3 does.
func (l *objectLock) deleteObjects(w http.ResponseWriter, r *http.Request) {
	if l.swallow {
		_, _ = w.Write([]byte(`<DeleteResult></DeleteResult>`))
		return
	}
	var in deleteRequest
	if err := xml.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var refused []deleteError
	passed := in
	passed.Objects = nil
	l.mu.Lock()
	for _, o := range in.Objects {
		if until, ok := l.retained[lockID(o.Key, o.VersionID)]; (ok && until.After(time.Now())) || l.denied[lockID(o.Key, o.VersionID)] {
			refused = append(refused, deleteError{Key: o.Key, VersionID: o.VersionID, Code: "AccessDenied", Message: "Access Denied because object protected by object lock."})
			continue
		}
		passed.Objects = append(passed.Objects, o)
	}
	l.mu.Unlock()
	body, _ := xml.Marshal(passed)
	forward := r.Clone(r.Context())
	forward.Body, forward.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	for name := range forward.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-amz-checksum") || strings.EqualFold(name, "Content-Md5") {
			forward.Header.Del(name)
		}
	}
	recorder := httptest.NewRecorder()
	l.next.ServeHTTP(recorder, forward)
	var out deleteResult
	if err := xml.Unmarshal(recorder.Body.Bytes(), &out); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out.Errors = append(out.Errors, refused...)
	response, _ := xml.Marshal(out)
	_, _ = w.Write(response)
}

// A version an object lock keeps is tagged for the bucket's lifecycle rule, its other
// tags kept, and the purge succeeds: every other version under the prefix is deleted.
func TestPurgeS3HandsLockedVersionsToTheLifecycleRule(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	backend := s3mem.New()
	lock := &objectLock{next: gofakes3.New(backend).Server(), retained: map[string]time.Time{}, tags: map[string]string{}, denied: map[string]bool{}}
	server := httptest.NewServer(lock)
	t.Cleanup(server.Close)
	s := s3test.NewAt(t, server.URL, backend, "backups")
	for i := range 5 {
		g.Expect(s.Write(ctx, fmt.Sprintf("entry/full-%d", i), 2, false)).To(Succeed())
	}
	g.Expect(s.Write(ctx, "entry-2/full", 1, false)).To(Succeed())
	// The first version of entry/full-1 is kept until tomorrow; entry/full-2's retention is over.
	versions, err := s.Client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("backups"), Prefix: aws.String("entry/full-")})
	g.Expect(err).NotTo(HaveOccurred())
	var keptID string
	for _, v := range versions.Versions {
		switch aws.ToString(v.Key) {
		case "entry/full-1":
			if keptID == "" {
				keptID = aws.ToString(v.VersionId)
				lock.retained[lockID("entry/full-1", keptID)] = time.Now().Add(24 * time.Hour)
			}
		case "entry/full-2":
			lock.retained[lockID("entry/full-2", aws.ToString(v.VersionId))] = time.Now().Add(-time.Hour)
		}
	}

	result, err := Run(ctx, spec(s, "entry/"), env(s))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(Result{Deleted: 9, HandedOver: 1}))
	after, _ := s.Versions(g)
	g.Expect(after).To(ConsistOf("entry/full-1 "+keptID, HavePrefix("entry-2/full ")))
	g.Expect(lock.tags).To(HaveLen(1))
	tags := lock.tags[lockID("entry/full-1", keptID)]
	g.Expect(tags).To(ContainSubstring("<Key>" + ExpiryTagKey + "</Key><Value>" + ExpiryTagValue + "</Value>"))
	g.Expect(tags).To(ContainSubstring("<Key>kept</Key><Value>yes</Value>"))

	// Run again, as a retried deletion does: the kept version is tagged again, nothing fails.
	result, err = Run(ctx, spec(s, "entry/"), env(s))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(Result{HandedOver: 1}))
}

// A version refused without a lock keeping it (a missing permission) fails the purge,
// naming it, and is not handed over.
func TestPurgeS3FailsOnAVersionRefusedWithoutALock(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	backend := s3mem.New()
	lock := &objectLock{next: gofakes3.New(backend).Server(), retained: map[string]time.Time{}, tags: map[string]string{}, denied: map[string]bool{}}
	server := httptest.NewServer(lock)
	t.Cleanup(server.Close)
	s := s3test.NewAt(t, server.URL, backend, "backups")
	g.Expect(s.Write(ctx, "entry/full", 1, false)).To(Succeed())
	g.Expect(s.Write(ctx, "entry/incr", 1, false)).To(Succeed())
	versions, err := s.Client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("backups"), Prefix: aws.String("entry/full")})
	g.Expect(err).NotTo(HaveOccurred())
	id := aws.ToString(versions.Versions[0].VersionId)
	lock.denied[lockID("entry/full", id)] = true

	_, err = Run(ctx, spec(s, "entry/"), env(s))
	g.Expect(err).To(MatchError(ErrNotPurged))
	g.Expect(err).To(MatchError(ContainSubstring("entry/full (version " + id + "): AccessDenied")))
	g.Expect(lock.tags).To(BeEmpty())
	after, _ := s.Versions(g)
	g.Expect(after).To(Equal([]string{"entry/full " + id}))
}

// A server that reports versions deleted and lists them again fails the purge instead of
// holding it forever.
func TestPurgeS3FailsWhereTheServerKeepsWhatItReportsDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	backend := s3mem.New()
	lock := &objectLock{next: gofakes3.New(backend).Server(), retained: map[string]time.Time{}, tags: map[string]string{}, denied: map[string]bool{}, swallow: true}
	server := httptest.NewServer(lock)
	t.Cleanup(server.Close)
	s := s3test.NewAt(t, server.URL, backend, "backups")
	// More than a page: the purge lists again after its first round.
	work := errgroup.Group{}
	work.SetLimit(8)
	for i := range pageSize + 1 {
		work.Go(func() error { return s.Write(ctx, fmt.Sprintf("entry/full-%04d", i), 1, false) })
	}
	g.Expect(work.Wait()).To(Succeed())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, spec(s, "entry/"), env(s))
		done <- err
	}()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(MatchError(ContainSubstring("again after it reported it deleted"))))
}
