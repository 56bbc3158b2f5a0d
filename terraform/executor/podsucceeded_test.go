package executor

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

// A run pod's success is taken from what its terraformer wrote last, after the final
// save, not waited for from the kubelet: with a kubelet that never reports the end of a
// container, an apply and then a destroy still end, with their outputs and phases, and
// their pods and Secrets are deleted. What the apply's pod wrote is not the destroy's.
func TestARunPodsSuccessIsTakenFromWhatItWroteLast(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, 3)
	startKubeletWith(f, kubeletOptions{unreportedExits: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	result, err := f.podExecutor().Run(ctx, f.request(run.Apply))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Outputs["names"]).To(HaveLen(3))
	g.Expect(f.Items(g)).To(HaveLen(3))
	g.Expect(result.Phases).To(And(HaveKeyWithValue("init", BeNumerically(">", 0)), HaveKeyWithValue("apply", BeNumerically(">", 0))), "from the termination message it wrote")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.PodName()}, &corev1.Pod{}))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Objects.ID.EnvSecretName()}, &corev1.Secret{}))).To(BeTrue())

	result, err = f.podExecutor().Run(ctx, f.request(run.Destroy))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.Phases).To(HaveKeyWithValue("destroy", BeNumerically(">", 0)))
	g.Expect(f.Items(g)).To(BeEmpty())
}
