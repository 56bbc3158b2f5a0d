package realnode

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/executor"
	runpkg "github.com/terraseed/terraseed/terraform/run"
)

// A run pod reads a workload identity's token from a file mounted from the credentials
// Secret, and the kubelet changes the file when the Secret changes: gardenlet renews the
// token at about half its lifetime, and a run that outlives a token reads the renewed one.
// The pod is the pod executor's own (its volumes, security context and user), with the
// pause program in place of the terraformer, which the file is read under from the host.
func TestARunPodsTokenFileFollowsTheSecret(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n := startNode(ctx, t)
	defer func() { _ = n.Stop() }()
	c, err := client.New(n.Config, client.Options{Scheme: clientgoscheme.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shoot--wi-"}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "cloudprovider", Labels: map[string]string{
			"security.gardener.cloud/purpose": "workload-identity-token-requestor",
		}},
		Data: map[string][]byte{"token": []byte("first-token"), "config": []byte(`{"roleARN":"arn:aws:iam::1:role/r"}`)},
	}
	g.Expect(c.Create(ctx, secret)).To(Succeed())

	e := &executor.PodExecutor{Client: c, Clientset: n.Clientset, Image: PauseImage, Command: []string{"/pause"}, ManageServiceAccount: true}
	req := runpkg.Request{ID: runpkg.ID{Namespace: ns.Name, Name: "infra", Purpose: runpkg.PurposeInfra}, Command: runpkg.Apply,
		Files: map[string]corev1.SecretKeySelector{"TF_VAR_web_identity_token_file": {LocalObjectReference: corev1.LocalObjectReference{Name: "cloudprovider"}, Key: "token"}}}
	runCtx, stopWaiting := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		_, err := e.Run(runCtx, req)
		ended <- err
	}()
	defer func() { stopWaiting(); <-ended }()

	var container string
	g.Eventually(func(g Gomega) {
		pod, err := n.Clientset.CoreV1().Pods(ns.Name).Get(ctx, req.ID.PodName(), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "status: %+v", pod.Status)
		g.Expect(pod.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "TF_VAR_web_identity_token_file", Value: "/credentials/0/token"}))
		container = pod.Status.ContainerStatuses[0].ContainerID
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	pid, err := n.ContainerPID(ctx, container)
	g.Expect(err).NotTo(HaveOccurred())
	// The file as the container sees it, in its mount namespace.
	file := fmt.Sprintf("/proc/%d/root/credentials/0/token", pid)
	g.Expect(os.ReadFile(file)).To(Equal([]byte("first-token")))
	_, err = os.Stat(fmt.Sprintf("/proc/%d/root/credentials/0/config", pid))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the token alone is mounted, not the config")

	renewedAt := time.Now()
	secret.Data["token"] = []byte("renewed-token")
	g.Expect(c.Update(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(os.ReadFile(file)).To(Equal([]byte("renewed-token")))
	}).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the kubelet changes the file in the running pod")
	t.Logf("the file in the pod changed %s after the Secret", time.Since(renewedAt).Round(100*time.Millisecond))

	envSecret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: req.ID.EnvSecretName()}, envSecret)).To(Succeed())
	for key, value := range envSecret.Data {
		g.Expect(string(value)).NotTo(ContainSubstring("token"), "the run's own Secret holds no token (%s)", key)
	}
}
