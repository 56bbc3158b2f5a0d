package compat_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	"github.com/gardener/gardener/pkg/component/extensions/infrastructure"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
)

// deadlineRunTimeout is the run timeout of the controller that serves the deadline
// provider: far shorter than its apply, which sleeps deadlineSleep.
const (
	deadlineRunTimeout = 30 * time.Second
	deadlineSleep      = 120
)

// startDeadlineController runs a second controller on the seed that serves only the
// deadline provider (testdata/deadline-providers), which the seed's controller does not
// know, with a short run timeout.
func startDeadlineController(t *testing.T, s *seedCluster) {
	t.Helper()
	g := NewWithT(t)
	providers, err := filepath.Abs(filepath.Join("testdata", "deadline-providers"))
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	logPath := filepath.Join(dir, "controller.log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(s.dir, "bin", "terraseed"), "run",
		"--kubeconfig", filepath.Join(s.dir, "kubeconfig"), "--executor=local",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--work-dir", filepath.Join(dir, "work"), "--providers-dir", providers,
		"--provider-types=deadline", "--run-timeout="+deadlineRunTimeout.String())
	cmd.Env = append(os.Environ(),
		"TERRASEED_TERRAFORM="+os.Getenv("TERRASEED_TERRAFORM"),
		"TERRASEED_PROVIDER_MIRROR="+os.Getenv("TERRASEED_PROVIDER_MIRROR"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			printTail(logPath, 32<<10)
		}
	})
}

// An apply that takes longer than Gardener waits: gardenlet's Infrastructure component
// waits with a short timeout, the run is stopped at its run timeout before that wait ends,
// and the error Gardener's wait returns is the run's, naming how far the apply got, not a
// bare timeout of the wait.
func TestGardenletsWaitNamesTheProgressOfAnApplyPastItsRunTimeout(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := seedFor(t)
	startDeadlineController(t, s)
	sh := newShootInSeed(t, "deadline", "deadline", map[string][]byte{"token": []byte("secret-token")})
	ctx := sh.ctx

	// Gardener's wait, as the Infrastructure component's, with a timeout of 3 minutes (not
	// its 10) and the tests' 18 polls of 2 s until an error the extension reports is severe.
	const gardenerWait = 3 * time.Minute
	infra := infrastructure.New(testr.New(t), s.client, &infrastructure.Values{
		Namespace:         sh.namespace,
		Name:              sh.shoot.Name,
		Type:              sh.shoot.Spec.Provider.Type,
		ProviderConfig:    &runtime.RawExtension{Raw: []byte(toJSON(map[string]int{"seconds": deadlineSleep}))},
		Region:            sh.shoot.Spec.Region,
		SSHPublicKey:      []byte(sshPublicKey),
		AnnotateOperation: true,
	}, waitInterval, waitSevereThreshold, gardenerWait)
	g.Expect(infra.Deploy(ctx)).To(Succeed())
	start := time.Now()
	err := infra.Wait(ctx)
	elapsed := time.Since(start)
	g.Expect(err).To(HaveOccurred(), sh.describe)
	t.Logf("Wait returned after %s: %v", elapsed.Round(time.Second), err)

	g.Expect(elapsed).To(BeNumerically("<", gardenerWait), "the run's error ends the wait before its own timeout")
	g.Expect(err.Error()).NotTo(ContainSubstring("extension state is not succeeded"), "not the wait's own timeout")
	g.Expect(err).To(MatchError(And(
		ContainSubstring("error during reconciliation"),
		ContainSubstring("running for more than "+deadlineRunTimeout.String()),
		ContainSubstring("when stopped it was applying 1/2: creating terraform_data.slow"),
	)), "Gardener's error names the run timeout and how far the apply got")
	g.Expect(err.Error()).NotTo(ContainSubstring("secret-token"), "no credentials in Gardener's error")

	failed := sh.get(g)
	g.Expect(failed.Status.LastError).NotTo(BeNil(), describe(failed))
	g.Expect(failed.Status.LastError.Codes).NotTo(ContainElement(gardencorev1beta1.ErrorConfigurationProblem), "a run timeout is retried, not the configuration's fault")
	g.Expect(strings.Contains(failed.Status.LastError.Description, "terraform_data.slow")).To(BeTrue(), describe(failed))

	// A shoot whose infrastructure never came up is deleted.
	g.Expect(infra.Destroy(ctx)).To(Succeed())
	g.Expect(infra.WaitCleanup(ctx)).To(Succeed(), sh.describe)
}
