package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/test/testenv"
)

// A bad flag stops the command before it writes anything to the API server: the error
// names the flag, and the webhook's certificate Secret and configuration, which the
// manager writes first once the flags are good, do not exist.
func TestABadFlagFailsBeforeAnythingIsWritten(t *testing.T) {
	g := NewWithT(t)
	env, kubeconfigPath := startAPIServer(t)
	// KUBECONFIG is what --kubeconfig sets; restored after the test.
	t.Setenv("KUBECONFIG", "")

	ctx := context.Background()
	namespace := env.Namespace(t)
	const secret, configuration = "flags-webhook-cert", "flags-controlplane"
	// A command that starts with these flags writes the Secret and the configuration.
	good := []string{"--kubeconfig", kubeconfigPath, "--executor=pod", "--terraformer-image=terraformer", "--provider-types=local", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--heartbeat-namespace", namespace, "--webhook-mode=url", "--webhook-port", fmt.Sprint(testenv.FreePort(t)), "--webhook-namespace", namespace,
		"--webhook-secret", secret, "--webhook-configuration", configuration, "--webhook-cert-dir", t.TempDir(),
		"--tracing-endpoint", testenv.StartTraceReceiver(t).URL}
	for _, bad := range [][]string{
		{"--drift-interval=-1m"},
		{"--max-runs=0"},
		{"--drift-share=1.5"},
		{"--drift-share=0"},
		{"--runs-per-account=-1"},
		{"--drift-aging=0s"},
		{"--state-history=-1"},
		{"--concurrency=0"},
		{"--run-timeout=-1h"},
		{"--pod-creation-timeout=-1s"},
		{"--controlplane-health-period=-30s"},
		{"--extension-classes=shoot,cluster"},
		{"--extension-class=cluster"},
		{"--extension-class=seed", "--extension-classes=seed"},
		{"--provider-types=local,nowhere"},
		{"--kinds=dnsrecord,bucket"},
		{"--executor=nowhere"},
		{"--terraformer-image="},
		{"--terraformer-memory-limit=lots"},
		{"--terraformer-cpu-limit=fast"},
		{"--terraformer-ephemeral-storage-limit=-1Gi"},
		{"--controlplane-allowed-images=https://registry.k8s.io/"},
		{"--terraformer-pod-labels=a b=c"},
		{"--terraformer-priority-class-name=Not_A_Name"},
		{"--terraformer-node-selector=pool=run pods"},
		{`--terraformer-tolerations=[{"key":"dedicated","operator":"Equals","value":"runs"}]`},
		{`--terraformer-tolerations={"key":"dedicated"}`},
		{`--terraformer-topology-spread-constraints=[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"Never"}]`},
		{"--opentofu", "--terraform="},
		{"--executor=local", "--concurrency=-1"},
		{"--webhook-mode=sometimes"},
		{"--state-storage=etcd"},
		{"--tracing-endpoint=collector:4318"},
	} {
		flag, _, _ := strings.Cut(bad[len(bad)-1], "=")
		// A flag let through starts the manager, which runs until the deadline.
		started, stop := context.WithTimeout(ctx, 20*time.Second)
		err := runController(started, append(append([]string{}, good...), bad...))
		stop()
		g.Expect(err).To(MatchError(ContainSubstring(flag)), "%v", bad)
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, &corev1.Secret{}))).To(BeTrue(), "%v: no webhook certificate Secret", bad)
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: configuration}, &admissionregistrationv1.MutatingWebhookConfiguration{}))).To(BeTrue(), "%v: no webhook configuration", bad)
		var secrets corev1.SecretList
		g.Expect(env.Client.List(ctx, &secrets, client.InNamespace(namespace))).To(Succeed())
		g.Expect(secrets.Items).To(BeEmpty(), "%v: nothing written in the namespace", bad)
	}

	// The same command with good flags writes both.
	running, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runController(running, good) }()
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, &corev1.Secret{})).To(Succeed())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: configuration}, &admissionregistrationv1.MutatingWebhookConfiguration{})).To(Succeed())
	}).WithTimeout(time.Minute).Should(Succeed())
	select {
	case err := <-done:
		t.Fatalf("the manager with good flags stopped: %v", err)
	default:
	}
	g.Expect(tracing.Enabled()).To(BeTrue(), "--tracing-endpoint turns tracing on")
	stop()
	// How it stops is not this test's subject; on a busy machine a runnable may outlast
	// the manager's grace period.
	if err := <-done; err != nil {
		t.Logf("the manager stopped with: %v", err)
	}
	g.Expect(tracing.Enabled()).To(BeFalse(), "the traces sent and tracing off once the command returned")
}

// startAPIServer starts a kube-apiserver and etcd with the CRDs installed, stopped when
// the test ends, and writes its admin kubeconfig to a file for the command's --kubeconfig.
// The control-plane binaries are required: without them the test fails, naming how to
// set them up.
func startAPIServer(t *testing.T) (*testenv.Environment, string) {
	t.Helper()
	g := NewWithT(t)
	env, err := testenv.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig, err := env.AdminKubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	return env, path
}
