package infrastructure_test

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
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/infrastructure"
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

// TestATenantsRunsShareOneBudgetWhateverTheirCredentialsName: a run the cloud throttled
// (by the provider's own pattern) fails with Gardener's retried rate-limit code, an event
// says its account backs off, and a metric counts it under a hash of the budget. The next
// run of the same project waits, saying it waits for its account's budget without naming
// the account, although its credentials name another access key: the shoot's owner writes
// the credentials, and another value must not be another budget. Another project's create
// goes through, although its credentials name the throttled one's access key: no tenant
// spends another's budget by writing its key.
func TestATenantsRunsShareOneBudgetWhateverTheirCredentialsName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const accountA, accountA2 = "account-a-token-secret", "account-a-second-token-secret"
	// Unique project names, as env.Namespace makes unique namespaces.
	unique := strings.TrimPrefix(env.Namespace(t), "test-")
	projectA, projectB := "a"+unique, "b"+unique
	throttled := throttlingShoot(t, shootNamespace(t, projectA, "throttled"), "throttled", accountA, "PutObject: SlowDown: Please reduce your request rate.")
	next := throttlingShoot(t, shootNamespace(t, projectA, "next"), "next", accountA2, "")
	other := throttlingShoot(t, shootNamespace(t, projectB, "other"), "other", accountA, "")
	startControllerIn(t, []string{throttled.namespace, next.namespace, other.namespace}, workDir(t), env.Config, 4, logr.Logger{},
		func(a *controllerSetup) { a.Pipeline.RunsPerAccount = 1 })

	g.Expect(env.Client.Create(ctx, throttled.infra)).To(Succeed())
	// Retried, it waits for the account's budget at once: its last error stays.
	g.Eventually(func(g Gomega) {
		last := throttled.get(g).Status.LastError
		g.Expect(last).NotTo(BeNil())
		g.Expect(last.Codes).To(ContainElement(extensionsv1alpha1.ErrorInfraRateLimitsExceeded))
		g.Expect(last.Description).To(ContainSubstring("SlowDown"))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return eventReasons(g, throttled.namespace, throttled.infra.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElement(infrastructure.ReasonThrottled))
	g.Eventually(func(g Gomega) string { return metricsText(g) }).WithTimeout(30 * time.Second).
		Should(MatchRegexp(`terraseed_terraform_throttled_runs_total\{budget="[0-9a-f]{12}"\} [1-9]`))

	// The project's budget pauses: its next run waits and says why, whatever key its
	// credentials name; the other project's does not, whatever key its credentials name.
	g.Expect(env.Client.Create(ctx, next.infra)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		last := next.get(g).Status.LastOperation
		g.Expect(last).NotTo(BeNil())
		return last.Description
	}).WithTimeout(30 * time.Second).Should(ContainSubstring("waiting for its cloud account's run budget"))
	g.Expect(env.Client.Create(ctx, other.infra)).To(Succeed())
	other.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(next.get(g).Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateProcessing), "the throttled project's run still waits")

	// No credential reaches the metrics, the status or the events.
	text := metricsText(g)
	// Both of the project's Infrastructures wait.
	g.Expect(text).To(MatchRegexp(`terraseed_terraform_budget_runs\{budget="[0-9a-f]{12}",state="waiting"\} 2`))
	for _, s := range []*shoot{throttled, next, other} {
		g.Expect(fmt.Sprintf("%+v", s.get(g).Status)).NotTo(Or(ContainSubstring(accountA), ContainSubstring(accountA2)))
	}
	g.Expect(text).NotTo(Or(ContainSubstring(accountA), ContainSubstring(accountA2)))
	events := &corev1.EventList{}
	g.Expect(env.Client.List(ctx, events)).To(Succeed())
	g.Expect(fmt.Sprintf("%+v", events.Items)).NotTo(Or(ContainSubstring(accountA), ContainSubstring(accountA2)))
}
