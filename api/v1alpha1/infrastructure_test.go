package v1alpha1_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// readExample reads a test data file as an unstructured object placed in namespace.
func readExample(t *testing.T, file, namespace string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	asJSON, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(asJSON); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace(namespace)
	return obj
}

func TestSeedExamplesKeepProviderConfigByteForByte(t *testing.T) {
	for _, file := range []string{"seed-001-aws.yaml", "seed-002-aws.yaml", "seed-003-azure.yaml"} {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			example := readExample(t, file, env.Namespace(t))
			providerConfig, found, err := unstructured.NestedMap(example.Object, "spec", "providerConfig")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(found).To(BeTrue())
			// encoding/json writes map keys sorted and compact: the canonical JSON form.
			want, err := json.Marshal(providerConfig)
			g.Expect(err).NotTo(HaveOccurred())

			g.Expect(env.Client.Create(ctx, example)).To(Succeed())

			got := &extensionsv1alpha1.Infrastructure{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(example), got)).To(Succeed())
			g.Expect(got.Spec.ProviderConfig).NotTo(BeNil())
			g.Expect(string(got.Spec.ProviderConfig.Raw)).To(Equal(string(want)))
			g.Expect(got.Spec.Type).To(Equal(example.Object["spec"].(map[string]any)["type"]))
			g.Expect(got.Spec.Region).To(Equal("eu-west-1"))
			g.Expect(got.Spec.SecretRef.Name).NotTo(BeEmpty())

			// Written back unchanged through the typed client, the bytes stay the same.
			g.Expect(env.Client.Update(ctx, got)).To(Succeed())
			again := &extensionsv1alpha1.Infrastructure{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(example), again)).To(Succeed())
			g.Expect(string(again.Spec.ProviderConfig.Raw)).To(Equal(string(want)))
		})
	}
}

func TestSSHPublicKeyRoundTripsAsBytes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key := []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIO terraseed\n")
	infra := minimalInfrastructure(env.Namespace(t))
	infra.Spec.SSHPublicKey = key
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())

	got := &extensionsv1alpha1.Infrastructure{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(infra), got)).To(Succeed())
	g.Expect(got.Spec.SSHPublicKey).To(Equal(key))
}

func minimalInfrastructure(namespace string) *extensionsv1alpha1.Infrastructure {
	return &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Name: "infrastructure", Namespace: namespace},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{
				Type:           "local",
				ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"kind":"InfrastructureConfig"}`)},
			},
			Region:    "local",
			SecretRef: corev1SecretRef("cloudprovider", namespace),
		},
	}
}

func TestStatusIsASubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	infra := minimalInfrastructure(env.Namespace(t))
	infra.Status.NodesCIDR = ptr("10.0.0.0/16")
	g.Expect(env.Client.Create(ctx, infra)).To(Succeed())
	g.Expect(infra.Status.NodesCIDR).To(BeNil(), "status sent with a create is dropped")

	// A status write leaves the spec alone.
	infra.Status.NodesCIDR = ptr("10.1.0.0/16")
	infra.Spec.Region = "changed-by-status-write"
	g.Expect(env.Client.Status().Update(ctx, infra)).To(Succeed())
	got := &extensionsv1alpha1.Infrastructure{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(infra), got)).To(Succeed())
	g.Expect(got.Status.NodesCIDR).To(HaveValue(Equal("10.1.0.0/16")))
	g.Expect(got.Spec.Region).To(Equal("local"))
	g.Expect(got.Generation).To(Equal(int64(1)), "a status write does not bump the generation")

	// A spec write leaves the status alone.
	got.Spec.Region = "eu-west-1"
	got.Status.NodesCIDR = ptr("10.2.0.0/16")
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	after := &extensionsv1alpha1.Infrastructure{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(infra), after)).To(Succeed())
	g.Expect(after.Spec.Region).To(Equal("eu-west-1"))
	g.Expect(after.Status.NodesCIDR).To(HaveValue(Equal("10.1.0.0/16")))
	g.Expect(after.Generation).To(Equal(int64(2)))
}

func TestGardenerShapedStatusDecodesWithoutLoss(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	statusJSON, err := os.ReadFile(filepath.Join("testdata", "gardener-status-full.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var status map[string]any
	g.Expect(json.Unmarshal(statusJSON, &status)).To(Succeed())

	example := readExample(t, "seed-002-aws.yaml", env.Namespace(t))
	g.Expect(env.Client.Create(ctx, example)).To(Succeed())
	example.Object["status"] = status
	g.Expect(env.Client.Status().Update(ctx, example)).To(Succeed())

	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(extensionsv1alpha1.GroupVersion.WithKind("Infrastructure"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(example), stored)).To(Succeed())
	storedStatus, err := json.Marshal(stored.Object["status"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(storedStatus).To(MatchJSON(statusJSON), "the API server keeps every status field")

	// Every field the server returns is known to the Go types...
	wire, err := stored.MarshalJSON()
	g.Expect(err).NotTo(HaveOccurred())
	decoder := json.NewDecoder(bytes.NewReader(wire))
	decoder.DisallowUnknownFields()
	typed := &extensionsv1alpha1.Infrastructure{}
	g.Expect(decoder.Decode(typed)).To(Succeed())
	g.Expect(typed.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateError))
	g.Expect(typed.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorInfraQuotaExceeded, extensionsv1alpha1.ErrorInfraDependencies))
	g.Expect(typed.Status.Conditions).To(HaveLen(1))
	g.Expect(typed.Status.Networking.Services).To(ConsistOf("100.64.0.0/13"))

	// ...and encoding them again gives back the same object.
	reencoded, err := json.Marshal(typed)
	g.Expect(err).NotTo(HaveOccurred())
	var original, roundTripped map[string]any
	g.Expect(json.Unmarshal(wire, &original)).To(Succeed())
	g.Expect(json.Unmarshal(reencoded, &roundTripped)).To(Succeed())
	g.Expect(roundTripped).To(Equal(original))
}

func TestMissingTypeIsRejectedNamingTheField(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	example := readExample(t, "seed-003-azure.yaml", env.Namespace(t))
	unstructured.RemoveNestedField(example.Object, "spec", "type")

	err := env.Client.Create(ctx, example)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.type"))
	g.Expect(err.Error()).To(ContainSubstring("Required value"))
}

func TestEmptyTypeIsRejectedNamingTheField(t *testing.T) {
	g := NewWithT(t)
	infra := minimalInfrastructure(env.Namespace(t))
	infra.Spec.Type = ""
	err := env.Client.Create(context.Background(), infra)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.type"))
}

func TestClusterKeepsMirroredObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shoot := `{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Shoot","spec":{"networking":{"nodes":"10.250.0.0/16","pods":"100.96.0.0/11","services":"100.64.0.0/13"}}}`
	cluster := &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: env.Namespace(t)},
		Spec: extensionsv1alpha1.ClusterSpec{
			Shoot:        runtime.RawExtension{Raw: []byte(shoot)},
			Seed:         &runtime.RawExtension{Raw: []byte(`{"kind":"Seed"}`)},
			CloudProfile: runtime.RawExtension{Raw: []byte(`{"kind":"CloudProfile"}`)},
		},
	}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, cluster) })

	got := &extensionsv1alpha1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got)).To(Succeed())
	g.Expect(string(got.Spec.Shoot.Raw)).To(MatchJSON(shoot))
}

// A self-hosted shoot's Cluster, which gardenadm writes without spec.seed (Gardener
// v1.147 and later), is accepted, and reads back without a seed.
func TestClusterWithoutSeedIsAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := env.Namespace(t)
	selfHosted := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.gardener.cloud/v1alpha1",
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"shoot":        map[string]any{"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot", "metadata": map[string]any{"name": "self-hosted"}},
			"cloudProfile": map[string]any{"kind": "CloudProfile"},
		},
	}}
	g.Expect(env.Client.Create(ctx, selfHosted)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, selfHosted) })

	got := &extensionsv1alpha1.Cluster{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, got)).To(Succeed())
	g.Expect(got.Spec.Seed).To(BeNil())
	g.Expect(string(got.Spec.Shoot.Raw)).To(ContainSubstring("self-hosted"))

	// Written back by our own types, it stays without a seed.
	got.Labels = map[string]string{"written": "back"}
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, got)).To(Succeed())
	g.Expect(got.Spec.Seed).To(BeNil())
}
