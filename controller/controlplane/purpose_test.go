package controlplane_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/controlplane"
)

// TestExposureControlPlaneFailsNamingThePurpose: Gardener removed spec.purpose in v1.123
// (every other test's ControlPlane has none, a shoot's own). One that still says exposure
// fails once, terminally, naming the field, deploys nothing and holds no finalizer, so
// that its deletion is not held up.
func TestExposureControlPlaneFailsNamingThePurpose(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := newControlPlane(t, "local", localConfig(1))
	exposure := extensionsv1alpha1.PurposeExposure
	cp.Spec.Purpose = &exposure
	startController(t, cp.Namespace)
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())

	var failed *extensionsv1alpha1.ControlPlane
	g.Eventually(func(g Gomega) {
		failed = get(g, cp)
		g.Expect(failed.Status.LastOperation).NotTo(BeNil())
		g.Expect(failed.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateFailed), "%+v", failed.Status.LastOperation)
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(failed.Status.LastOperation.Type).To(Equal(extensionsv1alpha1.LastOperationTypeCreate))
	g.Expect(failed.Status.LastError.Description).To(ContainSubstring(`spec.purpose: Invalid value: "exposure": Gardener removed the field in v1.123`))
	g.Expect(failed.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	g.Expect(failed.Finalizers).NotTo(ContainElement(controlplane.Finalizer))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: cp.Namespace, Name: "cloud-controller-manager"}, &appsv1.Deployment{}))).To(BeTrue(), "nothing is deployed")
	// Terminal: not tried again until the ControlPlane changes.
	g.Consistently(func(g Gomega) {
		g.Expect(get(g, cp).Status.LastError.LastUpdateTime).To(Equal(failed.Status.LastError.LastUpdateTime))
	}).WithTimeout(3 * time.Second).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, failed)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(cp), &extensionsv1alpha1.ControlPlane{}))
	}).WithTimeout(timeout).Should(BeTrue())
}
