package main

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/terraform/executor"
)

// The classes served are --extension-classes, or Gardener's former single-class flag
// --extension-class when it alone is given; an empty one is class shoot, as Gardener
// reads it. A bad value names its flag.
func TestExtensionClassesAreChecked(t *testing.T) {
	shoot, seed, garden := extensionsv1alpha1.ExtensionClassShoot, extensionsv1alpha1.ExtensionClassSeed, extensionsv1alpha1.ExtensionClassGarden
	for _, c := range []struct {
		args []string
		want []extensionsv1alpha1.ExtensionClass
		err  string
	}{
		{args: nil, want: []extensionsv1alpha1.ExtensionClass{shoot}},
		{args: []string{"--extension-classes=shoot, seed"}, want: []extensionsv1alpha1.ExtensionClass{shoot, seed}},
		{args: []string{"--extension-classes=seed,garden,seed"}, want: []extensionsv1alpha1.ExtensionClass{seed, garden}},
		{args: []string{"--extension-classes="}, want: []extensionsv1alpha1.ExtensionClass{shoot}},
		{args: []string{"--extension-class=garden"}, want: []extensionsv1alpha1.ExtensionClass{garden}},
		{args: []string{"--extension-class="}, want: []extensionsv1alpha1.ExtensionClass{shoot}},
		{args: []string{"--extension-classes=shoot,cluster"}, err: `--extension-classes: "cluster" is not one of [shoot seed garden]`},
		{args: []string{"--extension-classes=shoot,"}, err: `--extension-classes: "" is not one of`},
		{args: []string{"--extension-class=cluster"}, err: `--extension-class: "cluster" is not one of`},
		{args: []string{"--extension-class=seed,garden"}, err: `--extension-class: "seed,garden" names more than one class; --extension-classes takes a list`},
		{args: []string{"--extension-class=seed", "--extension-classes=seed"}, err: "--extension-class and --extension-classes are both given"},
	} {
		g := NewWithT(t)
		flags := flag.NewFlagSet("run", flag.ContinueOnError)
		o := managerOptions{}
		o.bind(flags)
		g.Expect(flags.Parse(c.args)).To(Succeed())
		classes, err := o.extensionClasses()
		if c.err != "" {
			g.Expect(err).To(MatchError(ContainSubstring(c.err)), "%v", c.args)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "%v", c.args)
		g.Expect(classes).To(Equal(c.want), "%v", c.args)
	}
}

// The pod executor's configuration, as the flags make it, gives run pods a memory limit,
// a CPU and a disk limit (terraform/executor's TestNewGivesRunPodsTheConfiguredResources:
// the pods carry them).
func TestTerraformerPodsGetLimits(t *testing.T) {
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
	// A provider plugin that spins or fills its disk is held in its pod too.
	g.Expect(cfg.Resources.Limits.Cpu().String()).To(Equal("2"))
	g.Expect(cfg.Resources.Limits.StorageEphemeral().String()).To(Equal("1Gi"))

	for _, bad := range []string{"lots", "128Mi"} {
		o.terraformerMemoryLimit = bad
		_, err = o.executorConfig()
		g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("--terraformer-memory-limit: %q", bad))))
	}
	o.terraformerMemoryLimit = "2Gi"
	for _, bad := range []string{"fast", "50m", "0"} {
		o.terraformerCPULimit = bad
		_, err = o.terraformerResources()
		g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("--terraformer-cpu-limit: %q", bad))))
	}
	o.terraformerCPULimit = "2"
	for _, bad := range []string{"big", "-1Gi", "0"} {
		o.terraformerStorageLimit = bad
		_, err = o.terraformerResources()
		g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("--terraformer-ephemeral-storage-limit: %q", bad))))
	}
}

// What one reconcile decodes of a state is bounded by what the controller is given: by
// default a share of its memory limit (TERRASEED_MEMORY_LIMIT, the chart's downward API) per
// reconcile and run read at once, never more than a state may take.
func TestTheStateBoundFollowsTheMemoryLimit(t *testing.T) {
	g := NewWithT(t)
	o := managerOptions{concurrency: 10, maxRuns: 5}
	size, err := o.stateBound("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(size).To(Equal(64<<20), "no limit: the most a state may take")
	size, err = o.stateBound("536870912")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(size).To(Equal(512<<20/60), "512 MiB: half of it for states, each held twice, 15 at once")
	o.maxStateSize = "8Mi"
	size, err = o.stateBound("536870912")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(size).To(Equal(8 << 20))
	for _, bad := range []string{"lots", "0", "65Mi"} {
		o.maxStateSize = bad
		_, err = o.stateBound("")
		g.Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("--max-state-size: %q", bad))))
	}
	o.maxStateSize = ""
	_, err = o.stateBound("a lot")
	g.Expect(err).To(MatchError(ContainSubstring("TERRASEED_MEMORY_LIMIT")))
}

// The manager's cache keeps no managed fields: nothing reads them, and they are a large
// part of what a seed's cached Infrastructures and Secrets' metadata hold.
func TestTheCacheKeepsNoManagedFields(t *testing.T) {
	g := NewWithT(t)
	env, _ := startAPIServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	namespace := env.Namespace(t)
	infra := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "infrastructure"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"},
			Region:      "local-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: namespace},
		},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cloudprovider"}}
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	g.Expect(infra.ManagedFields).NotTo(BeEmpty(), "the API server keeps them")

	o := managerOptions{metricsAddress: "0", probeAddress: "0", pprofAddress: "0"}
	mgr, err := o.newControllerManager(env.Config, nil, time.Second, nil)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = mgr.Start(ctx) }()
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	cached := &extensionsv1alpha1.Infrastructure{}
	g.Expect(mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(infra), cached)).To(Succeed())
	g.Expect(cached.Spec.SecretRef.Name).To(Equal("cloudprovider"))
	g.Expect(cached.ManagedFields).To(BeEmpty())
	metadata := &metav1.PartialObjectMetadata{}
	metadata.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	g.Expect(mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(secret), metadata)).To(Succeed())
	g.Expect(metadata.UID).To(Equal(secret.UID))
	g.Expect(metadata.ManagedFields).To(BeEmpty())
}
