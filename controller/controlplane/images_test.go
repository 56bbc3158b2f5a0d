package controlplane_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/controlplane"
)

// The local control plane's image is chosen by the shoot's owner and runs in the seed with
// the credentials mounted: only images under the prefixes the operator allows are applied.
func TestControlPlaneImageOutsideTheAllowedPrefixesIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	config := func(image string) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"image":"` + image + `"}}`)}
	}
	cp := newControlPlane(t, "local", string(config("registry.k8s.io.attacker.example.com/steal:1").Raw))
	startController(t, cp.Namespace, func(a *controlplane.Actuator) { a.AllowedImages = []string{"registry.k8s.io/"} })
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())

	var failed *extensionsv1alpha1.ControlPlane
	g.Eventually(func(g Gomega) {
		failed = get(g, cp)
		g.Expect(failed.Status.LastOperation).NotTo(BeNil())
		g.Expect(failed.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateFailed))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(failed.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	g.Expect(failed.Status.LastError.Description).To(ContainSubstring(
		`Deployment cloud-controller-manager: container cloud-controller-manager: image "registry.k8s.io.attacker.example.com/steal:1" is not under a prefix the operator allows (registry.k8s.io/)`))
	err := env.Client.Get(ctx, types.NamespacedName{Namespace: cp.Namespace, Name: "cloud-controller-manager"}, &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing is applied")

	// An allowed image is applied.
	g.Eventually(func(g Gomega) {
		current := get(g, cp)
		current.Spec.ProviderConfig = config("registry.k8s.io/pause:3.10")
		g.Expect(env.Client.Update(ctx, current)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		deployment := &appsv1.Deployment{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: cp.Namespace, Name: "cloud-controller-manager"}, deployment)).To(Succeed())
		g.Expect(deployment.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.k8s.io/pause:3.10"))
	}).WithTimeout(timeout).Should(Succeed())
}

// A prefix ends at a boundary of an image reference: registry.k8s.io stands for the
// registry, never for registry.k8s.io.attacker.example. Prefixes that cannot be images'
// are refused, naming the flag's entry.
func TestImagePrefixesAreNormalised(t *testing.T) {
	g := NewWithT(t)
	prefixes, err := controlplane.ParseImagePrefixes(" registry.k8s.io, europe-docker.pkg.dev/gardener-project/releases/,example.com/ccm:, ,localhost/pause")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(prefixes).To(Equal([]string{
		"registry.k8s.io/", "registry.k8s.io:", "registry.k8s.io@",
		"europe-docker.pkg.dev/gardener-project/releases/",
		"example.com/ccm:",
		"localhost/pause/", "localhost/pause:", "localhost/pause@",
	}))
	for image, allowed := range map[string]bool{
		"registry.k8s.io/pause:3.10":                     true,
		"registry.k8s.io.attacker.example/pause:3.10":    false,
		"registry.k8s.io:5000/pause:3.10":                true,
		"registry.k8s.iox/pause":                         false,
		"example.com/ccm:v1":                             true,
		"example.com/ccm-evil:v1":                        false,
		"localhost/pause:3.10":                           true,
		"localhost/pause@sha256:0123":                    true,
		"localhost/pauser:1":                             false,
		"europe-docker.pkg.dev/gardener-project/other/x": false,
	} {
		g.Expect(controlplane.ImageAllowed(prefixes, image)).To(Equal(allowed), image)
	}
	for _, bad := range []string{"https://registry.k8s.io/", "registry.k8s.io/a b", "registry.k8s.io/'x"} {
		_, err := controlplane.ParseImagePrefixes("registry.k8s.io/," + bad)
		g.Expect(err).To(MatchError(ContainSubstring(bad)), bad)
	}
	none, err := controlplane.ParseImagePrefixes("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty(), "no prefixes: every image")
}
