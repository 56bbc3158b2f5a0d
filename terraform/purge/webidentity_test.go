package purge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/gomega"

	"github.com/terraseed/terraseed/terraform/internal/s3test"
)

// stsFront answers AssumeRoleWithWebIdentity at the S3 endpoint, as an S3-compatible store
// with STS does (LocalStack), which gofakes3 does not, and records the token and role it
// was given and the access keys the S3 requests were signed with.
type stsFront struct {
	next        http.Handler
	mu          sync.Mutex
	assumed     []string
	signedWith  map[string]bool
	sessionKeys string
}

func (s *stsFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/" {
		if err := r.ParseForm(); err == nil && r.PostForm.Get("Action") == "AssumeRoleWithWebIdentity" {
			s.mu.Lock()
			s.assumed = append(s.assumed, r.PostForm.Get("RoleArn")+" "+r.PostForm.Get("WebIdentityToken"))
			s.mu.Unlock()
			w.Header().Set("Content-Type", "text/xml")
			_, _ = w.Write([]byte(`<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>` + s.sessionKeys + `</AccessKeyId><SecretAccessKey>session-secret</SecretAccessKey><SessionToken>session-token</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/backup/x</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser>
</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`))
			return
		}
	}
	if _, credential, ok := strings.Cut(r.Header.Get("Authorization"), "Credential="); ok {
		s.mu.Lock()
		s.signedWith[strings.SplitN(credential, "/", 2)[0]] = true
		s.mu.Unlock()
	}
	s.next.ServeHTTP(w, r)
}

// With a workload identity the purge assumes its role with the token of the file the run
// names, and signs its S3 requests with the role's session, not with any static key.
func TestPurgeWithAWorkloadIdentityAssumesItsRole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	backend := s3mem.New()
	front := &stsFront{next: gofakes3.New(backend).Server(), signedWith: map[string]bool{}, sessionKeys: "ASIASESSION"}
	server := httptest.NewServer(front)
	t.Cleanup(server.Close)
	s := s3test.NewAt(t, server.URL, backend, "backups")
	g.Expect(s.Write(ctx, "entry/full", 2, false)).To(Succeed())
	g.Expect(s.Write(ctx, "entry-2/full", 1, false)).To(Succeed())
	token := filepath.Join(t.TempDir(), "token")
	g.Expect(os.WriteFile(token, []byte("the-identity-token"), 0o600)).To(Succeed())
	front.signedWith = map[string]bool{}

	result, err := Run(ctx, spec(s, "entry/"), []string{
		"TF_VAR_endpoint=" + s.URL, "TF_VAR_web_identity_token_file=" + token, "TF_VAR_role_arn=arn:aws:iam::123456789012:role/backup",
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result).To(Equal(Result{Deleted: 2}))
	g.Expect(front.assumed).To(Equal([]string{"arn:aws:iam::123456789012:role/backup the-identity-token"}))
	g.Expect(front.signedWith).To(Equal(map[string]bool{"ASIASESSION": true}))
	after, _ := s.Versions(g)
	g.Expect(after).To(HaveLen(1))
}
