package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
)

// A controller with the local executor whose lease another replica takes over while an
// apply runs returns (and so exits) only once the run has stopped terraform and saved
// its state: controller-runtime skips the graceful shutdown when the lease is lost.
func TestALostLeaseEndsTheControllerOnlyOnceItsLocalRunSaved(t *testing.T) {
	g := NewWithT(t)
	env, kubeconfigPath := startAPIServer(t)
	t.Setenv("KUBECONFIG", "")
	ctx := context.Background()
	namespace := env.Namespace(t)
	admin, err := env.AdminKubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cloudprovider"},
		Data: map[string][]byte{"kubeconfig": admin}})).To(Succeed())
	providers, err := filepath.Abs("testdata/providers")
	g.Expect(err).NotTo(HaveOccurred())
	workDir := t.TempDir()

	var drained atomic.Bool
	logger := funcr.NewJSON(func(obj string) {
		if strings.Contains(obj, `"msg":"localRunsEnded"`) {
			drained.Store(true)
		}
	}, funcr.Options{})
	done := make(chan error, 1)
	go func() {
		done <- runController(logf.IntoContext(ctx, logger), []string{"--kubeconfig", kubeconfigPath, "--executor=local", "--terraform", testenv.Terraform(t),
			"--work-dir", workDir, "--providers-dir", providers, "--provider-types=slow", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--heartbeat-namespace=", "--drift-interval=0", "--leader-elect", "--leader-election-namespace", namespace})
	}()
	lease := &coordinationv1.Lease{}
	g.Eventually(func(g Gomega) {
		select {
		case err := <-done:
			StopTrying("the controller stopped").Wrap(err).Now()
		default:
		}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leaderElectionID}, lease)).To(Succeed())
		g.Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).NotTo(BeEmpty())
	}).WithTimeout(time.Minute).Should(Succeed())

	infra := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "infrastructure"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "slow", ProviderConfig: &k8sruntime.RawExtension{Raw: []byte(`{}`)}},
			Region:      "local-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider"},
		},
	}
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())
	objects := state.RunObjects{ID: run.ID{Namespace: namespace, Name: infra.Name, Purpose: run.PurposeInfra}}
	// The apply is under way: the first resource is saved, the second sleeps.
	g.Eventually(func(g Gomega) {
		stored, err := objects.ReadState(ctx, env.Client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(stored)).To(ContainSubstring(`"name": "first"`))
	}).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())

	// Another replica takes the Lease over, as one does once the leader's renewals stop
	// reaching the API server.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity, lease.Spec.AcquireTime, lease.Spec.RenewTime = ptr.To("another-replica"), &now, &now
		return env.Client.Update(ctx, lease)
	}).Should(Succeed())

	var stopErr error
	g.Eventually(done).WithTimeout(leaderRenewDeadline + executorBound() + 30*time.Second).Should(Receive(&stopErr))
	g.Expect(stopErr).To(MatchError(ContainSubstring("leader election lost")))
	// When the controller returns, its process exits and terraform with it: the run must
	// be over by then.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(infra), infra)).To(Succeed())
	id := objects.ID
	id.UID = infra.UID
	active, err := (&executor.LocalExecutor{BaseDir: filepath.Join(workDir, "runs")}).Active(ctx, id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(active).To(BeFalse(), "the controller returned with its run under way, before terraform stopped and the final save")
	g.Expect(drained.Load()).To(BeTrue(), "the controller said nothing of its local runs")
	stored, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(stored)).To(ContainSubstring(`"name": "first"`))
}

// executorBound is how long the local runs may take to stop and save.
func executorBound() time.Duration {
	return executor.Config{Kind: "local"}.ShutdownTimeout()
}
