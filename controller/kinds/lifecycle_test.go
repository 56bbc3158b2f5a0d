package kinds_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
	"github.com/terraseed/terraseed/test/testenv"
)

func TestLifecycleCreateChangeDelete(t *testing.T) {
	testLifecycle(t, terraformer.TerraformVersion)
}

// TestLifecycleOnOpenTofu runs the same lifecycle with OpenTofu instead of terraform.
func TestLifecycleOnOpenTofu(t *testing.T) {
	tofu := testenv.OpenTofu(t)
	testLifecycle(t, terraformer.OpenTofuVersion, func(a *controllerSetup) {
		e := a.Executor.(*executor.LocalExecutor)
		e.Settings.Terraform, e.Settings.OpenTofu = tofu, true
	})
}

// testLifecycle creates, changes and deletes a local Infrastructure with the binary of
// the given version.
func testLifecycle(t *testing.T, version string, opts ...actuatorOption) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	startControllerWith(t, s.namespace, workDir(t), env.Config, 2, opts...)
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())

	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	g.Expect(infra.Status.ObservedGeneration).To(Equal(infra.Generation))
	g.Expect(infra.Status.NodesCIDR).To(HaveValue(Equal("10.250.0.0/16")))
	g.Expect(infra.Status.LastError).To(BeNil())
	g.Expect(infra.Finalizers).To(ContainElement(kinds.InfrastructureFinalizer))
	g.Expect(infra.Status.Conditions).To(ContainElement(And(
		HaveField("Type", extension.ConditionReady), HaveField("Status", extensionsv1alpha1.ConditionTrue))))
	var providerStatus map[string]any
	g.Expect(json.Unmarshal(infra.Status.ProviderStatus.Raw, &providerStatus)).To(Succeed())
	g.Expect(providerStatus).To(HaveKeyWithValue("kind", "InfrastructureStatus"))
	g.Expect(providerStatus).To(HaveKeyWithValue("namespace", s.targetNamespace()))

	// The real objects exist.
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, &corev1.Namespace{})).To(Succeed())
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, policy)).To(Succeed())
	g.Expect(policy.Spec.Ingress[0].From[0].IPBlock.CIDR).To(Equal("10.250.0.0/19"))
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
	state, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(state)).To(ContainSubstring(`"kubectl_manifest"`))
	g.Expect(string(state)).To(MatchRegexp(`"terraform_version":\s*"`+regexp.QuoteMeta(version)+`"`), "the state was written by the binary chosen")
	// gardenlet's backup of the shoot's state finds the terraform state in the status.
	g.Expect(stateInStatus(g, infra)).To(Equal(state))

	// A changed zone CIDR is applied.
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		current.Spec.ProviderConfig = testenv.LocalProviderConfig("10.250.32.0/19")
		g.Expect(env.Client.Update(ctx, current)).To(Succeed())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		current := s.get(g)
		g.Expect(current.Status.ObservedGeneration).To(Equal(current.Generation))
		g.Expect(current.Status.LastOperation.Type).To(Equal(extensionsv1alpha1.LastOperationTypeReconcile))
		g.Expect(current.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, policy)).To(Succeed())
	g.Expect(policy.Spec.Ingress[0].From[0].IPBlock.CIDR).To(Equal("10.250.32.0/19"))
	changedState, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changedState).NotTo(Equal(state))
	g.Expect(stateInStatus(g, s.get(g))).To(Equal(changedState), "the status follows every apply")

	// Deleting destroys the objects, then the run objects and the finalizer go.
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, policy))).To(BeTrue())
	namespace := &corev1.Namespace{}
	// envtest runs no namespace controller: a deleted namespace stays Terminating.
	if err := env.Client.Get(ctx, client.ObjectKey{Name: s.targetNamespace()}, namespace); err == nil {
		g.Expect(namespace.DeletionTimestamp).NotTo(BeNil())
	}
	assertRunObjectsGone(g, s)
}

// stateInStatus decodes .status.state: the gzipped terraform state.
func stateInStatus(g Gomega, infra *extensionsv1alpha1.Infrastructure) []byte {
	g.Expect(infra.Status.State).NotTo(BeNil())
	var kept struct {
		APIVersion, Kind string
		TerraformState   []byte
	}
	g.Expect(json.Unmarshal(infra.Status.State.Raw, &kept)).To(Succeed())
	g.Expect(kept.Kind).To(Equal("InfrastructureState"))
	reader, err := gzip.NewReader(bytes.NewReader(kept.TerraformState))
	g.Expect(err).NotTo(HaveOccurred())
	state, err := io.ReadAll(reader)
	g.Expect(err).NotTo(HaveOccurred())
	return state
}

// TestForceDeletionLeavesTheResources deletes an Infrastructure of a shoot whose owner
// confirmed force deletion: nothing is destroyed, what the runs kept goes, and an event
// says what was left behind.
func TestForceDeletionLeavesTheResources(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newShoot(t, "10.250.0.0/19")
	s.createSecret(t, adminKubeconfig(t))
	cluster := &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: s.namespace},
		Spec: extensionsv1alpha1.ClusterSpec{
			Shoot: runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","metadata":{"name":"shoot",` +
				`"deletionTimestamp":"2026-11-23T00:00:00Z","annotations":{"confirmation.gardener.cloud/force-deletion":"true"}}}`)},
			Seed:         &runtime.RawExtension{Raw: []byte(`{}`)},
			CloudProfile: runtime.RawExtension{Raw: []byte(`{}`)},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
	startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	before := realObjects(g, s)

	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(realObjects(g, s)).To(Equal(before), "nothing was destroyed")
	assertRunObjectsGone(g, s)
	g.Eventually(func(g Gomega) []string { return eventReasons(g, s.namespace, s.infra.Name) }).
		WithTimeout(30 * time.Second).Should(ContainElement("ForceDeleted"))
}

func assertRunObjectsGone(g Gomega, s *shoot) {
	ctx := context.Background()
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}
	for _, name := range []string{objects.ConfigName(), objects.StateName()} {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, &corev1.ConfigMap{}))).To(BeTrue(), name)
	}
	for _, name := range []string{objects.VarsName(), s.infra.Name + ".infra.credentials"} {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, &corev1.Secret{}))).To(BeTrue(), name)
	}
}

func TestDeletionUsesTheLastCredentialsWhenTheSecretIsGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdShoot(t, "10.250.0.0/19")

	// Gardener deletes the credentials before the Infrastructure, sometimes.
	g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "cloudprovider"}})).To(Succeed())
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	s.waitGone(t)
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-0"}, &networkingv1.NetworkPolicy{}))).To(BeTrue(), "destroyed")
	assertRunObjectsGone(g, s)
}

func TestDeletionWithoutAnyCredentialsSaysWhatItNeeds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdShoot(t, "10.250.0.0/19")

	// Both the secret and the stored credentials are gone.
	for _, name := range []string{"cloudprovider", s.infra.Name + ".infra.credentials"} {
		g.Expect(env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: name}})).To(Succeed())
	}
	g.Expect(env.Client.Delete(ctx, s.get(g))).To(Succeed())
	infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeDelete, extensionsv1alpha1.LastOperationStateError)
	g.Expect(infra.Status.LastError.Description).To(ContainSubstring("recreate the secret"))

	// Recreating the secret lets the deletion finish.
	s.createSecret(t, adminKubeconfig(t))
	s.waitGone(t)
	assertRunObjectsGone(g, s)
}

func TestManyInfrastructuresAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	startControllerWith(t, ns, workDir(t), env.Config, 4)
	appliesBefore := appliesSucceeded(g)
	initsBefore, phaseAppliesBefore := phasesTimed(g, "init"), phasesTimed(g, "apply")
	first := newShootIn(ns, "infra-0", "10.250.0.0/19")
	first.createSecret(t, adminKubeconfig(t))
	var shoots []*shoot
	for i := range 8 {
		s := newShootIn(ns, fmt.Sprintf("infra-%d", i), "10.250.0.0/19", "10.250.32.0/19")
		g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
		shoots = append(shoots, s)
	}
	for _, s := range shoots {
		infra := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
		g.Expect(infra.Status.NodesCIDR).To(HaveValue(Equal("10.250.0.0/16")))
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: s.targetNamespace(), Name: "zone-1"}, &networkingv1.NetworkPolicy{})).To(Succeed())
	}
	g.Expect(appliesSucceeded(g)-appliesBefore).To(BeNumerically("==", 8), "one successful apply each, counted in the metrics")
	g.Expect(phasesTimed(g, "init")-initsBefore).To(BeNumerically("==", 8), "each run's init, timed")
	g.Expect(phasesTimed(g, "apply")-phaseAppliesBefore).To(BeNumerically("==", 8), "each run's apply, timed")
}

// appliesSucceeded reads terraseed_terraform_runs_total{kind="infrastructure",command="apply",result="succeeded"}
// from the registry the manager serves on its metrics endpoint.
func appliesSucceeded(g Gomega) float64 {
	m := metric(g, "terraseed_terraform_runs_total", map[string]string{"kind": "infrastructure", "command": "apply", "result": "succeeded"})
	return m.GetCounter().GetValue()
}

// phasesTimed is the number of observations of terraseed_terraform_phase_duration_seconds
// for a phase of successful applies.
func phasesTimed(g Gomega, phase string) uint64 {
	m := metric(g, "terraseed_terraform_phase_duration_seconds", map[string]string{"kind": "infrastructure", "command": "apply", "phase": phase, "result": "succeeded"})
	return m.GetHistogram().GetSampleCount()
}

// metric finds the series of a family with the given labels in the registry the manager
// serves on its metrics endpoint; an empty series when there is none yet.
func metric(g Gomega, name string, want map[string]string) *dto.Metric {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
		for _, m := range family.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if maps.Equal(labels, want) {
				return m
			}
		}
	}
	return &dto.Metric{}
}
