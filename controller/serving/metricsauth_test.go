package serving

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// The bearer token is read as the API server's authenticator reads it: any case of the
// scheme, surrounding spaces trimmed, one token only.
func TestTheBearerTokenIsReadAsTheAPIServerReadsIt(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer abc":     "abc",
		"bearer abc":     "abc",
		"  BEARER  abc ": "abc",
		"Basic abc":      "",
		"Bearer":         "",
		"Bearer ":        "",
		"Bearer a b":     "",
		"":               "",
	} {
		t.Run(header, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "https://localhost/metrics", nil)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", header)
			token, ok := bearerToken(req)
			NewWithT(t).Expect(token).To(Equal(want))
			NewWithT(t).Expect(ok).To(Equal(want != ""))
		})
	}
}

// An access decision is kept for exactly what it was asked about: another user, group,
// extra value, verb or path is asked again.
func TestAnAccessDecisionIsKeptForWhatItWasAskedAbout(t *testing.T) {
	g := NewWithT(t)
	user := authenticationv1.UserInfo{Username: "u", UID: "1", Groups: []string{"a", "b"}, Extra: map[string]authenticationv1.ExtraValue{"x": {"1"}, "y": {"2"}}}
	key := decisionKey(user, "get", "/metrics")
	g.Expect(decisionKey(user, "get", "/metrics")).To(Equal(key))
	same := user
	same.Extra = map[string]authenticationv1.ExtraValue{"y": {"2"}, "x": {"1"}}
	g.Expect(decisionKey(same, "get", "/metrics")).To(Equal(key), "extra in another order")

	others := map[string]authenticationv1.UserInfo{
		"another name":        {Username: "v", UID: "1", Groups: user.Groups, Extra: user.Extra},
		"another UID":         {Username: "u", UID: "2", Groups: user.Groups, Extra: user.Extra},
		"a group less":        {Username: "u", UID: "1", Groups: []string{"a"}, Extra: user.Extra},
		"groups joined":       {Username: "u", UID: "1", Groups: []string{"ab"}, Extra: user.Extra},
		"an extra value less": {Username: "u", UID: "1", Groups: user.Groups, Extra: map[string]authenticationv1.ExtraValue{"x": {"1"}}},
		"an extra as a group": {Username: "u", UID: "1", Groups: []string{"a", "b", "x", "1"}, Extra: map[string]authenticationv1.ExtraValue{"y": {"2"}}},
	}
	for name, other := range others {
		g.Expect(decisionKey(other, "get", "/metrics")).NotTo(Equal(key), name)
	}
	g.Expect(decisionKey(user, "post", "/metrics")).NotTo(Equal(key), "another verb")
	g.Expect(decisionKey(user, "get", "/metricsx")).NotTo(Equal(key), "another path")
}
