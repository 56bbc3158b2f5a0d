package kinds_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/kinds"
)

// TestMetricsFollowAnInfrastructure follows one Infrastructure through the metrics the
// manager serves: its applies fail on credentials the API server refuses (the failures
// counted under the Gardener code lastError reports, and in a row for it), then succeed
// (failed runs back to 0, the size of .status.state published), a drift check finds it in
// sync, then drifted; once it is deleted, none of its series is left.
func TestMetricsFollowAnInfrastructure(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const period = 5 * time.Second
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, untrustedKubeconfig(t))
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, func(a *controllerSetup) { a.DriftInterval = period })
	unauthenticated := map[string]string{"kind": "Infrastructure", "code": string(extensionsv1alpha1.ErrorInfraUnauthenticated)}
	errorsBefore := metric(g, "terraseed_operation_errors_total", unauthenticated).GetCounter().GetValue()
	applies := s.series("command", "apply")
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())

	// A failing apply: counted under the code lastError reports, and in a row for this
	// Infrastructure. The failure is terminal: the next run comes with a change.
	failed := func(runs int) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			infra := s.get(g)
			g.Expect(infra.Status.LastError).NotTo(BeNil())
			g.Expect(infra.Status.LastError.Codes).To(ContainElement(extensionsv1alpha1.ErrorInfraUnauthenticated))
			g.Expect(metric(g, "terraseed_infrastructure_failed_runs", applies).GetGauge().GetValue()).To(BeEquivalentTo(runs))
			g.Expect(metric(g, "terraseed_operation_errors_total", unauthenticated).GetCounter().GetValue() - errorsBefore).To(BeEquivalentTo(runs))
		}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	}
	failed(1)
	// Every code has a series from the start, so that a rate over it is defined.
	g.Expect(seriesOf(g, "terraseed_operation_errors_total", map[string]string{"kind": "Infrastructure"})).To(HaveLen(11))
	setKubeconfig := func(kubeconfig []byte) {
		t.Helper()
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: "cloudprovider"}, secret)).To(Succeed())
		secret.Data["kubeconfig"] = kubeconfig
		g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	}
	// Other credentials the API server refuses: a second failure in a row.
	setKubeconfig(append(untrustedKubeconfig(t), '\n'))
	failed(2)

	// The credentials fixed: the next apply succeeds and the count goes back to 0.
	setKubeconfig(adminKubeconfig(t))
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(seriesOf(g, "terraseed_infrastructure_failed_runs", applies)).To(HaveLen(1))
	g.Expect(metric(g, "terraseed_infrastructure_failed_runs", applies).GetGauge().GetValue()).To(BeZero())
	g.Expect(infra.Status.State).NotTo(BeNil())
	g.Expect(metric(g, "terraseed_infrastructure_state_bytes", s.series()).GetGauge().GetValue()).To(BeEquivalentTo(len(infra.Status.State.Raw)))
	g.Expect(metric(g, "terraseed_infrastructure_state_limit_bytes", map[string]string{}).GetGauge().GetValue()).To(BeNumerically(">", len(infra.Status.State.Raw)))

	// In sync, as the condition says: one series of the drift state.
	g.Eventually(func(g Gomega) {
		g.Expect(condition(s.get(g), kinds.ConditionInSync)).To(HaveField("Status", extensionsv1alpha1.ConditionTrue))
		g.Expect(seriesOf(g, "terraseed_infrastructure_drift_state", s.series())).To(ConsistOf(HaveKeyWithValue("state", "in_sync")))
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(metric(g, "terraseed_infrastructure_drift_state", s.series("state", "in_sync")).GetGauge().GetValue()).To(BeEquivalentTo(1))

	// Changed by hand: drifted, and only that.
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, policy)).To(Succeed())
	policy.Spec.Ingress[0].From[0].IPBlock.CIDR = "192.168.0.0/24"
	g.Expect(env.Client.Update(ctx, policy)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(condition(s.get(g), kinds.ConditionInSync)).To(HaveField("Status", extensionsv1alpha1.ConditionFalse))
		g.Expect(seriesOf(g, "terraseed_infrastructure_drift_state", s.series())).To(ConsistOf(HaveKeyWithValue("state", "drifted")))
	}).WithTimeout(period + time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(metric(g, "terraseed_infrastructure_drift_state", s.series("state", "drifted")).GetGauge().GetValue()).To(BeEquivalentTo(1))
	// The drift plans succeeded: a plan series at 0 beside the apply's.
	g.Expect(metric(g, "terraseed_infrastructure_failed_runs", s.series("command", "plan")).GetGauge().GetValue()).To(BeZero())

	// Deleted: every series of the Infrastructure goes, the limit stays.
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"terraseed_infrastructure_failed_runs", "terraseed_infrastructure_drift_state", "terraseed_infrastructure_state_bytes"} {
			g.Expect(seriesOf(g, name, s.series())).To(BeEmpty(), name)
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(seriesOf(g, "terraseed_infrastructure_state_limit_bytes", map[string]string{})).To(HaveLen(1))
}

// series are the labels that name the shoot's Infrastructure in the per-Infrastructure
// metrics, and the given pairs of others.
func (s *shoot) series(pairs ...string) map[string]string {
	labels := map[string]string{"infrastructure_namespace": s.namespace, "infrastructure_name": s.infra.Name}
	for i := 0; i+1 < len(pairs); i += 2 {
		labels[pairs[i]] = pairs[i+1]
	}
	return labels
}

// seriesOf returns the labels of every series of a family in the registry the manager
// serves that carries the given labels (and maybe others).
func seriesOf(g Gomega, name string, having map[string]string) []map[string]string {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var found []map[string]string
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
	series:
		for _, m := range family.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range having {
				if labels[k] != v {
					continue series
				}
			}
			found = append(found, labels)
		}
	}
	return found
}
