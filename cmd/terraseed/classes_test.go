package main

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/test/testenv"
)

// `terraseed run --help` lists --extension-classes, and Gardener's former --extension-class.
func TestRunHelpShowsTheExtensionClasses(t *testing.T) {
	g := NewWithT(t)
	help, err := exec.Command(testenv.ControllerBinary(t), "run", "--help").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "--help is no failure: %s", help)
	g.Expect(string(help)).To(HavePrefix("usage: terraseed run [flags]"))
	g.Expect(string(help)).To(MatchRegexp(`(?m)^  --extension-classes classes\n.*spec\.class`))
	g.Expect(string(help)).To(MatchRegexp(`(?m)^  --extension-class class\n`))
}

// TestTwoExtensionClasses runs the command `terraseed run --extension-classes=shoot,seed`
// against a real API server, with a ControlPlane of every class: those of
// the two classes are served, one without spec.class among them (class shoot, as Gardener
// defines it), and the garden one is left alone. Started with Gardener's former
// --extension-class=garden instead, it serves the garden one.
func TestTwoExtensionClasses(t *testing.T) {
	g := NewWithT(t)
	env, kubeconfigPath := startAPIServer(t)

	ctx := context.Background()
	class := func(c extensionsv1alpha1.ExtensionClass) *extensionsv1alpha1.ExtensionClass { return &c }
	// One ControlPlane per namespace, as in a seed: each deploys the same objects.
	namespaces := map[string]string{}
	for name, c := range map[string]*extensionsv1alpha1.ExtensionClass{
		"unset":  nil,
		"shoot":  class(extensionsv1alpha1.ExtensionClassShoot),
		"seed":   class(extensionsv1alpha1.ExtensionClassSeed),
		"garden": class(extensionsv1alpha1.ExtensionClassGarden),
	} {
		ns := env.Namespace(t)
		namespaces[name] = ns
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"},
			Data: map[string][]byte{"kubeconfig": []byte("not read by the control plane")}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, localControlPlane(ns, name, c))).To(Succeed())
	}
	lastOperation := func(g Gomega, name string) *extensionsv1alpha1.LastOperation {
		cp := &extensionsv1alpha1.ControlPlane{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespaces[name], Name: name}, cp)).To(Succeed())
		return cp.Status.LastOperation
	}
	succeeded := func(names ...string) {
		t.Helper()
		for _, name := range names {
			g.Eventually(func(g Gomega) {
				last := lastOperation(g, name)
				g.Expect(last).NotTo(BeNil())
				g.Expect(last.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "%+v", last)
			}).WithTimeout(time.Minute).Should(Succeed(), name)
		}
	}

	stop := startRun(t, kubeconfigPath, namespaces["unset"], "--extension-classes=shoot,seed")
	succeeded("unset", "shoot", "seed")
	g.Consistently(func(g Gomega) { g.Expect(lastOperation(g, "garden")).To(BeNil()) }).WithTimeout(3*time.Second).Should(Succeed(), "the garden class is not served")
	stop()

	stop = startRun(t, kubeconfigPath, namespaces["unset"], "--extension-class=garden")
	succeeded("garden")
	stop()
}

// startRun runs the controller, the built command, as `terraseed run` with flags, serving
// the local provider, until the returned function is called.
func startRun(t *testing.T, kubeconfig, namespace string, flags ...string) (stop func()) {
	t.Helper()
	args := append([]string{"run", "--kubeconfig", kubeconfig, "--executor=pod", "--terraformer-image=terraformer", "--provider-types=local",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--heartbeat-namespace", namespace}, flags...)
	cmd := exec.Command(testenv.ControllerBinary(t), args...)
	output := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil || t.Failed() {
			t.Logf("terraseed %v: %v\n%s", flags, err, output.String())
		}
	}
	t.Cleanup(stop)
	return stop
}

// localControlPlane is a ControlPlane of the local provider of the given class.
func localControlPlane(namespace, name string, class *extensionsv1alpha1.ExtensionClass) *extensionsv1alpha1.ControlPlane {
	return &extensionsv1alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: extensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", Class: class, ProviderConfig: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"replicas":1}}`)}},
			Region:    "local-1",
			SecretRef: corev1.SecretReference{Name: "cloudprovider", Namespace: namespace},
			InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(
				`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"InfrastructureStatus","namespace":"` + namespace + `--infrastructure","zones":[{"name":"zone-a","workers":"10.250.0.0/19"}]}`)},
		},
	}
}
