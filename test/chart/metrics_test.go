package chart

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/controller/serving"
	"github.com/terraseed/terraseed/test/testenv"
)

// The metrics are served over HTTPS (HTTP/1.1 only) to callers the API server
// authenticates and authorizes, with the chart's RBAC: the controller may review tokens
// and access, and the chart's metrics-reader ClusterRole is what Prometheus needs.
func TestMetricsAreServedToAuthorizedReadersOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	release := env.Namespace(t)
	for _, o := range render(t, release) {
		if o.GetNamespace() == "" {
			o.SetName("metrics-" + o.GetName())
			if o.GetKind() == "ClusterRoleBinding" {
				o.Object["roleRef"].(map[string]any)["name"] = o.GetName()
			}
			if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
				o.Object["spec"].(map[string]any)["policyName"] = o.GetName()
			}
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
		}
		g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}

	// The controller's metrics server, as the chart's ServiceAccount.
	port := testenv.FreePort(t)
	mgr, err := ctrl.NewManager(serviceAccountConfig(release, "terraseed"), ctrl.Options{
		Scheme: env.Scheme, Metrics: serving.MetricsOptions(fmt.Sprintf("127.0.0.1:%d", port), true), HealthProbeBindAddress: "0",
	})
	g.Expect(err).NotTo(HaveOccurred())
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Prometheus' ServiceAccount is bound to the chart's metrics-reader role; another is not.
	monitoring := env.Namespace(t)
	clientset, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	tokens := map[string]string{}
	for _, name := range []string{"prometheus", "someone"} {
		g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: monitoring, Name: name}})).To(Succeed())
		token, err := clientset.CoreV1().ServiceAccounts(monitoring).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		tokens[name] = token.Status.Token
	}
	g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + monitoring},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-terraseed-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: monitoring, Name: "prometheus"}},
	})).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + monitoring}})
	})

	httpClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}, //nolint:gosec // the server's certificate is self-signed
	}}
	scrape := func(bearer string) (int, string, string) {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		g.Expect(err).NotTo(HaveOccurred())
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Proto, string(body)
	}

	g.Eventually(func() int { code, _, _ := scrape(""); return code }).WithTimeout(30 * time.Second).Should(Equal(http.StatusUnauthorized))
	code, _, _ := scrape("not-a-token")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a token the API server does not know")
	// The filter caches a denial for a while: the reader is asked once RBAC surely has its binding.
	g.Eventually(func() bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + monitoring + ":prometheus", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		return env.Client.Create(ctx, review) == nil && review.Status.Allowed
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	var proto, body string
	code, proto, body = scrape(tokens["prometheus"])
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(proto).To(Equal("HTTP/1.1"), "HTTP/2 is off")
	g.Expect(body).To(ContainSubstring("# HELP"))

	code, _, _ = scrape(tokens["someone"])
	g.Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount without the metrics-reader role")
}
