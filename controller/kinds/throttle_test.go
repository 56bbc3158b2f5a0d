package kinds_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
)

// throttlingShoot is an Infrastructure of the throttling provider in ns, whose credentials
// name the account; throttle, when set, is the message its runs fail with.
func throttlingShoot(t *testing.T, ns, name, account, throttle string) *shoot {
	t.Helper()
	s := newShootIn(ns, name)
	s.infra.Spec.Type = "throttling"
	config := `{"items":1}`
	if throttle != "" {
		config = fmt.Sprintf(`{"items":1,"throttle":%q}`, throttle)
	}
	s.infra.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(config)}
	s.infra.Spec.SecretRef.Name = name
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"token": []byte(account)}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
	return s
}

// metricsText is what the controller's registry exposes, as a scrape reads it.
func metricsText(g Gomega) string {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var b strings.Builder
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&b, f)
		g.Expect(err).NotTo(HaveOccurred())
	}
	return b.String()
}

// shootNamespace creates the seed namespace of a shoot of a project, named as gardenlet
// names it, shoot--<project>--<shoot>, and deletes it when the test ends.
func shootNamespace(t *testing.T, project, shoot string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--" + project + "--" + shoot}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// dnsSecret is the Secret "dns" of ns, which gardenlet fills for a shoot's DNSRecords with
// the seed's DNS credentials: here the throttling provider's token.
func dnsSecret(t *testing.T, ns, token string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dns"}, Data: map[string][]byte{"token": []byte(token)}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
}

// TestDNSAccountRunsOfTwoProjectsGivenTheSeedsSecretShareOneBudget: gardenlet gives the
// DNSRecords of every project's shoots the seed's DNS credentials, so their runs call one
// account and share one budget. A DNSRecord's run the cloud throttled (by the provider's
// own pattern) fails with Gardener's retried rate-limit code, an event says its account
// backs off, and a metric counts it under the budget's key. Then another project's
// DNSRecord of the same credentials waits, saying it waits for its account's budget
// without naming the account, and so does an Infrastructure of a third project whose
// credentials are the same: one budget per credentials, whatever project or kind. A
// project's DNSRecord of other credentials goes through, not slowed. No credential
// reaches the metrics, a status or an event.
func TestDNSAccountRunsOfTwoProjectsGivenTheSeedsSecretShareOneBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const seeds, others = "seed-dns-token-secret", "tenant-own-dns-token-secret"
	// Unique project names, as env.Namespace makes unique namespaces.
	unique := strings.TrimPrefix(env.Namespace(t), "test-")
	nsA, nsB, nsC := shootNamespace(t, "a"+unique, "shoot"), shootNamespace(t, "b"+unique, "shoot"), shootNamespace(t, "c"+unique, "shoot")
	dnsSecret(t, nsA, seeds)
	dnsSecret(t, nsB, seeds)
	dnsSecret(t, nsC, others)
	infra := throttlingShoot(t, shootNamespace(t, "d"+unique, "shoot"), "infra", seeds, "")
	startControllerIn(t, []string{nsA, nsB, nsC, infra.namespace}, workDir(t), env.Config, 4, logr.Logger{},
		servingKinds(""), func(a *controllerSetup) { a.Pipeline.RunsPerAccount = 1 })

	throttled := newDNSRecord(nsA, "external", "throttling", `{"throttle":"ChangeResourceRecordSets: SlowDown: Please reduce your request rate."}`,
		"api.a.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.10")
	g.Expect(env.Client.Create(ctx, throttled)).To(Succeed())
	// Retried, it waits for the account's budget at once: its last error stays.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(throttled), throttled)).To(Succeed())
		last := throttled.Status.LastError
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Codes).To(ContainElement(extensionsv1alpha1.ErrorInfraRateLimitsExceeded))
		g.Expect(last.Description).To(ContainSubstring("SlowDown"))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return eventReasons(g, nsA, throttled.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElement(kinds.ReasonThrottled))
	g.Eventually(func(g Gomega) string { return metricsText(g) }).WithTimeout(30 * time.Second).
		Should(MatchRegexp(`terraseed_terraform_throttled_runs_total\{budget="[0-9a-f]{12}"\} [1-9]`))

	// Another project's DNSRecord of the seed's credentials waits for the budget and says so.
	next := newDNSRecord(nsB, "external", "throttling", "", "api.b.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.11")
	g.Expect(env.Client.Create(ctx, next)).To(Succeed())
	waitingForBudget := func(obj kindObject) func(g Gomega) string {
		return func(g Gomega) string {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			last := obj.GetExtensionStatus().LastOperation
			g.Expect(last).NotTo(BeNil())
			return last.Description
		}
	}
	g.Eventually(waitingForBudget(next)).WithTimeout(30 * time.Second).Should(ContainSubstring("waiting for its cloud account's run budget"))
	// So does an Infrastructure of the same credentials: the budget is the credentials'.
	g.Expect(env.Client.Create(ctx, infra.infra)).To(Succeed())
	g.Eventually(waitingForBudget(infra.infra)).WithTimeout(30 * time.Second).Should(ContainSubstring("waiting for its cloud account's run budget"))

	// A project's DNSRecord of other credentials is not slowed.
	other := newDNSRecord(nsC, "external", "throttling", "", "api.c.example.com", extensionsv1alpha1.DNSRecordTypeA, "192.0.2.12")
	g.Expect(env.Client.Create(ctx, other)).To(Succeed())
	waitForKind(t, other, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(next), next)).To(Succeed())
	g.Expect(next.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateProcessing), "the seed's credentials' runs still wait")

	// The three runs of the seed's credentials wait under one budget.
	text := metricsText(g)
	g.Expect(text).To(MatchRegexp(`terraseed_terraform_budget_runs\{budget="[0-9a-f]{12}",state="waiting"\} 3`))
	statuses := []any{throttled.Status, next.Status, other.Status, infra.get(g).Status}
	g.Expect(fmt.Sprintf("%+v", statuses)).NotTo(Or(ContainSubstring(seeds), ContainSubstring(others)))
	g.Expect(text).NotTo(Or(ContainSubstring(seeds), ContainSubstring(others)))
	events := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, events)).To(Succeed())
	g.Expect(fmt.Sprintf("%+v", events.Items)).NotTo(Or(ContainSubstring(seeds), ContainSubstring(others)))
}
