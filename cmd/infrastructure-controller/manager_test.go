package main

import (
	"flag"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/executor"
)

func TestExtensionClassesAreChecked(t *testing.T) {
	g := NewWithT(t)
	classes, err := parseClasses("shoot, seed")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(classes).To(Equal([]extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassShoot, extensionsv1alpha1.ExtensionClassSeed}))
	_, err = parseClasses("shoot,cluster")
	g.Expect(err).To(MatchError(ContainSubstring(`"cluster" is not one of`)))
}

// The pod executor's configuration, as the flags make it, gives run pods a memory limit
// (terraform/executor's TestNewGivesRunPodsTheConfiguredResources: the pods carry it).
func TestTerraformerPodsGetAMemoryLimit(t *testing.T) {
	g := NewWithT(t)
	flags := flag.NewFlagSet("run", flag.ContinueOnError)
	o := managerOptions{}
	o.bind(flags)
	g.Expect(flags.Parse([]string{"--terraformer-image", "terraseed/terraseed:test"})).To(Succeed())
	cfg, err := o.executorConfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Kind).To(Equal(executor.KindPod))
	g.Expect(cfg.Resources.Limits.Memory().String()).To(Equal("2Gi"))
	g.Expect(cfg.Resources.Requests.Memory().String()).To(Equal("256Mi"))

	for _, bad := range []string{"lots", "128Mi"} {
		o.terraformerMemoryLimit = bad
		_, err = o.executorConfig()
		g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("--terraformer-memory-limit: %q", bad))))
	}
}
