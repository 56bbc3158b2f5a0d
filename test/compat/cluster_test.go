package compat_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

// clusterObjects are a local shoot's Shoot, Seed and CloudProfile as Gardener's types hold
// them: the fixture testdata/gardener-v1.149.3/cluster.json was encoded from at that version.
func clusterObjects() (*gardencorev1beta1.Shoot, *gardencorev1beta1.Seed, *gardencorev1beta1.CloudProfile) {
	now := metav1.NewTime(time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC))
	profile := &gardencorev1beta1.CloudProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "CloudProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Spec: gardencorev1beta1.CloudProfileSpec{
			Type:    "local",
			Regions: []gardencorev1beta1.Region{{Name: "local", Zones: []gardencorev1beta1.AvailabilityZone{{Name: "0"}, {Name: "1"}}}},
		},
	}
	seed := &gardencorev1beta1.Seed{
		TypeMeta:   metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "Seed"},
		ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Spec:       gardencorev1beta1.SeedSpec{Provider: gardencorev1beta1.SeedProvider{Type: "local", Region: "local", Zones: []string{"0", "1"}}},
		Status: gardencorev1beta1.SeedStatus{Conditions: []gardencorev1beta1.Condition{{
			Type: "GardenletReady", Status: gardencorev1beta1.ConditionTrue,
			LastTransitionTime: now, LastUpdateTime: now, Reason: "GardenletReady", Message: "Gardenlet is posting ready status.",
		}}},
	}
	shoot := &gardencorev1beta1.Shoot{
		TypeMeta:   metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot"},
		ObjectMeta: metav1.ObjectMeta{Name: "compat", Namespace: "garden-foobar"},
		Spec: gardencorev1beta1.ShootSpec{
			CloudProfile: &gardencorev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: "local"},
			Region:       "local",
			Provider:     gardencorev1beta1.Provider{Type: "local"},
			Networking:   &gardencorev1beta1.Networking{Pods: ptr("100.96.0.0/11"), Services: ptr("100.64.0.0/13"), Nodes: ptr("10.0.0.0/16")},
			ControlPlane: &gardencorev1beta1.ControlPlane{HighAvailability: &gardencorev1beta1.HighAvailability{
				FailureTolerance: gardencorev1beta1.FailureTolerance{Type: gardencorev1beta1.FailureToleranceTypeZone},
			}},
		},
	}
	return shoot, seed, profile
}

// gardenerClusterOf is the Cluster gardenlet writes for the objects.
func gardenerClusterOf(g Gomega, shoot *gardencorev1beta1.Shoot, seed *gardencorev1beta1.Seed, profile *gardencorev1beta1.CloudProfile) *gardenextensionsv1alpha1.Cluster {
	return &gardenextensionsv1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--foobar--compat"},
		Spec: gardenextensionsv1alpha1.ClusterSpec{
			CloudProfile: runtime.RawExtension{Raw: mustJSON(g, profile)},
			Seed:         &runtime.RawExtension{Raw: mustJSON(g, seed)},
			Shoot:        runtime.RawExtension{Raw: mustJSON(g, shoot)},
		},
	}
}

// zonesProvider is a provider whose configuration names what the Cluster of Gardener
// v1.150 adds: the shoot's control plane zones, the seed's constraints and whether the
// cloud profile allows zone pinning, each empty where the Cluster has none.
func zonesProvider(g Gomega) *templates.Provider {
	fsys := fstest.MapFS{
		"zones/provider.yaml": {Data: []byte("type: zones\ncredentials:\n  - key: token\n    variable: token\nresources:\n  - terraform_data\n" +
			"status:\n  providerStatus:\n    apiVersion: zones.provider.example.com/v1alpha1\n    kind: InfrastructureStatus\n    fields:\n      id: id\n")},
		"zones/schema.json": {Data: []byte(`{"type":"object"}`)},
		"zones/main.tf.tpl": {Data: []byte(`resource "terraform_data" "cluster" {
  input = {
    zones             = {{ tfvar "zones" (dig "spec" "controlPlane" "zones" list .cluster.shoot) }}
    constraints       = {{ tfvar "constraints" (dig "status" "constraints" list .cluster.seed) }}
    allow_zone_pinning = {{ tfvar "allow_zone_pinning" (dig "spec" "controlPlane" "allowZonePinning" false .cluster.cloudProfile) }}
    token             = sha256({{ .credentials.token }})
  }
}

output "id" {
  value = terraform_data.cluster.id
}
`)},
	}
	p, err := templates.LoadProvider(fsys, "zones", "test")
	g.Expect(err).NotTo(HaveOccurred())
	return p
}

// renderZones renders the zones provider for the Cluster and returns its variables.
func renderZones(g Gomega, cluster *extensionsv1alpha1.Cluster) map[string]any {
	infra := &extensionsv1alpha1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "compat", Namespace: cluster.Name}}
	infra.Spec.Type = "zones"
	infra.Spec.Region = "local"
	infra.Spec.SecretRef = corev1.SecretReference{Name: "cloudprovider", Namespace: cluster.Name}
	out, err := zonesProvider(g).Render(templates.Input{Infrastructure: infra, Cluster: cluster})
	g.Expect(err).NotTo(HaveOccurred())
	var vars map[string]any
	g.Expect(json.Unmarshal(out.TFVarsJSON, &vars)).To(Succeed())
	return vars
}

// TestClusterOfGardenerV1150PassesItsNewFieldsToTemplates: the Cluster gardenlet writes
// with Gardener v1.150's Shoot.spec.controlPlane.zones, Seed.status.constraints and
// CloudProfile.spec.controlPlane.allowZonePinning reaches templates whole: terraseed keeps
// the mirrored objects raw, so a template reads each new field as Gardener encodes it.
func TestClusterOfGardenerV1150PassesItsNewFieldsToTemplates(t *testing.T) {
	g := NewWithT(t)
	shoot, seed, profile := clusterObjects()
	shoot.Spec.ControlPlane.Zones = []string{"1", "0"}
	now := metav1.NewTime(time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC))
	seed.Status.Constraints = []gardencorev1beta1.Condition{{
		Type: gardencorev1beta1.SeedManagedResourcesHonored, Status: gardencorev1beta1.ConditionFalse,
		LastTransitionTime: now, LastUpdateTime: now, Reason: "ManagedResourcesIgnored", Message: "1 ManagedResource is ignored",
	}}
	profile.Spec.ControlPlane = &gardencorev1beta1.CloudProfileControlPlane{AllowZonePinning: true}
	theirs := gardenerClusterOf(g, shoot, seed, profile)

	ours := &extensionsv1alpha1.Cluster{}
	roundTrip(g, theirs, ours, &gardenextensionsv1alpha1.Cluster{})
	vars := renderZones(g, ours)
	g.Expect(vars).To(HaveKeyWithValue("zones", []any{"1", "0"}))
	g.Expect(vars).To(HaveKeyWithValue("allow_zone_pinning", true))
	g.Expect(vars["constraints"]).To(ConsistOf(And(
		HaveKeyWithValue("type", "ManagedResourcesHonored"), HaveKeyWithValue("status", "False"),
		HaveKeyWithValue("reason", "ManagedResourcesIgnored"), HaveKeyWithValue("message", "1 ManagedResource is ignored"))))
}

// TestClusterOfGardenerV1149IsServedUnchanged: the Cluster a gardenlet of v1.149.3 wrote
// (testdata/gardener-v1.149.3, encoded from clusterObjects at that version) is what
// v1.150.0 encodes for the same objects, a v1.150 gardenlet reads it into its types, and
// terraseed decodes it strictly, encodes it unchanged and renders it without the new fields.
func TestClusterOfGardenerV1149IsServedUnchanged(t *testing.T) {
	g := NewWithT(t)
	wire, err := os.ReadFile(filepath.Join("testdata", "gardener-v1.149.3", "cluster.json"))
	g.Expect(err).NotTo(HaveOccurred())
	shoot, seed, profile := clusterObjects()
	g.Expect(mustJSON(g, gardenerClusterOf(g, shoot, seed, profile))).To(MatchJSON(wire), "v1.150.0 encodes the objects as v1.149.3 did")

	theirs := &gardenextensionsv1alpha1.Cluster{}
	g.Expect(strictDecode(wire, theirs)).To(Succeed())
	for raw, into := range map[*runtime.RawExtension]any{
		&theirs.Spec.Shoot: &gardencorev1beta1.Shoot{}, theirs.Spec.Seed: &gardencorev1beta1.Seed{}, &theirs.Spec.CloudProfile: &gardencorev1beta1.CloudProfile{},
	} {
		g.Expect(strictDecode(raw.Raw, into)).To(Succeed(), "Gardener v1.150.0 reads v1.149.3's %s", raw.Raw[:40])
	}

	ours := &extensionsv1alpha1.Cluster{}
	g.Expect(strictDecode(wire, ours)).To(Succeed())
	back, err := json.Marshal(ours)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(MatchJSON(wire))
	vars := renderZones(g, ours)
	g.Expect(vars).To(HaveKeyWithValue("zones", BeEmpty()))
	g.Expect(vars).To(HaveKeyWithValue("constraints", BeEmpty()))
	g.Expect(vars).To(HaveKeyWithValue("allow_zone_pinning", false))
}
