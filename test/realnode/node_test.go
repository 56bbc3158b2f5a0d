package realnode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startNode starts a node for the test, or skips it where no node can run on this machine
// (ErrUnavailable names what is missing) and none is required, or the node is turned off
// (TERRASEED_E2E=skip); ctx bounds the wait for another package's node to stop, and the
// start.
func startNode(ctx context.Context, t *testing.T) *Node {
	t.Helper()
	if Disabled() {
		t.Skip("TERRASEED_E2E=skip")
	}
	n, err := Start(ctx, Options{Log: testWriter{t}})
	if errors.Is(err, ErrUnavailable) && !Required() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The node comes up, runs a pod, and leaves nothing behind on the host when it stops.
func TestStartRunStop(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n := startNode(ctx, t)
	stopped := false
	defer func() {
		if !stopped {
			_ = n.Stop()
		}
	}()
	dir := n.dir

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-"}}
	ns, err := n.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever,
			SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptrTo(true), RunAsNonRoot: ptrTo(true)},
		}}},
	}
	_, err = n.Clientset.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		current, err := n.Clientset.CoreV1().Pods(ns.Name).Get(ctx, "pause", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(current.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(current.Spec.NodeName).To(Equal(NodeName), "placed by kube-scheduler")
		g.Expect(current.Status.PodIP).To(HavePrefix("10.89."), "an address of the bridge's network")
	}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(mountsUnder(dir)).NotTo(BeEmpty(), "the running pod's mounts")

	// The host's address keeps its MAC while pods' interfaces come and go, even one whose
	// MAC is lower than every other port's.
	g.Expect(bridgeAddress()).To(Equal(bridgeMAC))
	g.Expect(run("ip", "link", "add", "terraseed-t0", "address", "00:00:00:00:00:01", "type", "veth", "peer", "name", "terraseed-t1")).To(Succeed())
	defer func() { _ = run("ip", "link", "del", "terraseed-t0") }()
	g.Expect(run("ip", "link", "set", "terraseed-t0", "master", bridge, "up")).To(Succeed())
	g.Expect(bridgeAddress()).To(Equal(bridgeMAC))
	g.Expect(run("ip", "link", "del", "terraseed-t0")).To(Succeed())
	g.Expect(bridgeAddress()).To(Equal(bridgeMAC))

	// The checks below look for anything of a node under its directory: another
	// package's node waiting for the machine's lock must not start meanwhile.
	n.stopKeepingLock()
	stopped = true
	defer func() { g.Expect(n.lock.Unlock()).To(Succeed()) }()
	g.Expect(dir).NotTo(BeADirectory())
	g.Expect(mountsUnder(dir)).To(BeEmpty())
	g.Expect(kubepodsCgroups()).To(BeEmpty())
	g.Expect(run("ip", "link", "show", bridge)).NotTo(Succeed(), "the bridge is gone")
	g.Expect(run("iptables", "-w", "-n", "-L", forwardChain)).NotTo(Succeed(), "the filter chain is gone")
	g.Expect(run("iptables", "-w", "-t", "nat", "-n", "-L", natChain)).NotTo(Succeed(), "the nat chain is gone")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		g.Expect(string(data)).NotTo(ContainSubstring(dir), "no process of the node runs")
	}
	netns, _ := os.ReadDir("/run/netns")
	for _, e := range netns {
		g.Expect(e.Name()).NotTo(HavePrefix("cni-"), "no pod network namespace is left")
	}
}

// bridgeAddress is the MAC the bridge has now.
func bridgeAddress() (string, error) {
	data, err := os.ReadFile(filepath.Join("/sys/class/net", bridge, "address"))
	return strings.TrimSpace(string(data)), err
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
