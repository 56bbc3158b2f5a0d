package compat_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gardenerbastion "github.com/gardener/gardener/extensions/pkg/bastion"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	operationsv1alpha1 "github.com/gardener/gardener/pkg/apis/operations/v1alpha1"
	bastioncontroller "github.com/gardener/gardener/pkg/gardenlet/controller/bastion"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/terraseed/terraseed/test/testenv"
)

// These tests drive a Bastion as gardenlet's bastion controller
// (pkg/gardenlet/controller/bastion) creates it from a user's operations.gardener.cloud
// Bastion: the provider type, the user data with the user's key, and the ingress blocks,
// and no providerConfig. The garden side (the operations Bastion and the Shoot) lives in
// controller-runtime's fake client, since Gardener's API server, which serves
// operations.gardener.cloud, does not run here; the seed side is the real API server.

// bastionGarden is the garden as gardenlet's bastion controller reads it: the shoot and
// a user's Bastion of it, which gardenlet keeps its finalizer on.
func bastionGarden(t *testing.T, sh *shootInSeed, name, providerType string) (client.Client, reconcile.Request) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gardencorev1beta1.AddToScheme, operationsv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	shoot := sh.shoot.DeepCopy()
	shoot.Spec.Provider.Type = providerType
	operation := &operationsv1alpha1.Bastion{
		ObjectMeta: metav1.ObjectMeta{Namespace: shoot.Namespace, Name: name},
		Spec: operationsv1alpha1.BastionSpec{
			ShootRef:     corev1.LocalObjectReference{Name: shoot.Name},
			ProviderType: &providerType,
			SSHPublicKey: sshPublicKey,
			Ingress:      []operationsv1alpha1.BastionIngressPolicy{{IPBlock: networkingv1.IPBlock{CIDR: "198.51.100.0/24"}}},
		},
	}
	garden := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(shoot, operation).
		WithStatusSubresource(&operationsv1alpha1.Bastion{}).
		Build()
	return garden, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: operation.Namespace, Name: operation.Name}}
}

// bastionReady is the operations Bastion's BastionReady condition, nil while it has none.
func bastionReady(g Gomega, ctx context.Context, garden client.Client, key types.NamespacedName) (*operationsv1alpha1.Bastion, *gardencorev1beta1.Condition) {
	operation := &operationsv1alpha1.Bastion{}
	g.Expect(garden.Get(ctx, key, operation)).To(Succeed())
	for i, c := range operation.Status.Conditions {
		if c.Type == operationsv1alpha1.BastionReady {
			return operation, &operation.Status.Conditions[i]
		}
	}
	return operation, nil
}

// TestBastionAsGardenletControllerCreatesItOnLocal: gardenlet's bastion controller
// creates the Bastion without a providerConfig; the local provider opens it, gardenlet
// copies its address into the user's Bastion and marks it ready, and removes it again
// when the user deletes theirs.
func TestBastionAsGardenletControllerCreatesItOnLocal(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sh := newShootInSeed(t, "bastion-gardenlet", "local", map[string][]byte{"kubeconfig": seedFor(t).kubeconfig})
	ctx := ctrllog.IntoContext(sh.ctx, testr.New(t))
	garden, request := bastionGarden(t, sh, "cli-gardenlet", "local")
	r := &bastioncontroller.Reconciler{GardenClient: garden, SeedClient: sh.seed.client, Clock: clock.RealClock{}}

	// gardenlet reconciles again when the seed's Bastion reports an operation; the test
	// reconciles at Gardener's poll interval instead of watching.
	g.Eventually(func(g Gomega) {
		_, err := r.Reconcile(ctx, request)
		g.Expect(err).NotTo(HaveOccurred())
		_, ready := bastionReady(g, ctx, garden, request.NamespacedName)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(gardencorev1beta1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
	}).WithTimeout(waitTimeout).WithPolling(waitInterval).Should(Succeed())

	seedBastion := &gardenextensionsv1alpha1.Bastion{}
	g.Expect(sh.seed.client.Get(ctx, client.ObjectKey{Namespace: sh.namespace, Name: request.Name}, seedBastion)).To(Succeed())
	g.Expect(seedBastion.Spec.ProviderConfig).To(BeNil(), "gardenlet gives the Bastion no providerConfig")
	g.Expect(string(seedBastion.Spec.UserData)).To(ContainSubstring(sshPublicKey))
	g.Expect(seedBastion.Status.Ingress).NotTo(BeNil())
	operation, _ := bastionReady(g, ctx, garden, request.NamespacedName)
	g.Expect(operation.Status.Ingress).To(Equal(seedBastion.Status.Ingress), "gardenlet gives the user the address the status names")

	g.Expect(garden.Delete(ctx, operation)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := r.Reconcile(ctx, request)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(apierrors.IsNotFound(garden.Get(ctx, request.NamespacedName, &operationsv1alpha1.Bastion{}))).To(BeTrue(), "gardenlet keeps its finalizer until the seed's Bastion is gone")
	}).WithTimeout(waitTimeout).WithPolling(waitInterval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(sh.seed.client.Get(ctx, client.ObjectKeyFromObject(seedBastion), &gardenextensionsv1alpha1.Bastion{}))).To(BeTrue())
}

// awsCloudProfile is an aws CloudProfile of Gardener's types, with the AWS extension's
// CloudProfileConfig giving each image version's AMI per region and architecture.
func awsCloudProfile(t *testing.T, bastion *gardencorev1beta1.Bastion) *gardencorev1beta1.CloudProfile {
	t.Helper()
	supported, preview := gardencorev1beta1.ClassificationSupported, gardencorev1beta1.ClassificationPreview
	version := func(v string, classification *gardencorev1beta1.VersionClassification, archs ...string) gardencorev1beta1.MachineImageVersion {
		//lint:ignore SA1019 the classification is what CloudProfiles before lifecycles carry, and Gardener's bastion helper still reads it
		return gardencorev1beta1.MachineImageVersion{ExpirableVersion: gardencorev1beta1.ExpirableVersion{Version: v, Classification: classification}, Architectures: archs}
	}
	machine := func(name, cpu, arch string) gardencorev1beta1.MachineType {
		return gardencorev1beta1.MachineType{Name: name, CPU: resource.MustParse(cpu), GPU: resource.MustParse("0"), Memory: resource.MustParse("1Gi"), Architecture: &arch, Usable: ptr(true)}
	}
	config, err := json.Marshal(map[string]any{
		"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1", "kind": "CloudProfileConfig",
		"machineImages": []any{
			map[string]any{"name": "gardenlinux", "versions": []any{
				map[string]any{"version": "1592.1.0", "regions": []any{
					map[string]any{"name": "eu-west-1", "ami": "ami-0159210000000000a", "architecture": "amd64"},
					map[string]any{"name": "eu-west-1", "ami": "ami-0159210000000000b", "architecture": "arm64"}}},
				map[string]any{"version": "1877.3.0", "regions": []any{
					map[string]any{"name": "eu-west-1", "ami": "ami-0187730000000000a", "architecture": "amd64"},
					map[string]any{"name": "eu-west-1", "ami": "ami-0187730000000000b", "architecture": "arm64"}}},
			}},
			map[string]any{"name": "suse-chost", "versions": []any{
				map[string]any{"version": "15.6.20250101", "regions": []any{
					map[string]any{"name": "eu-west-1", "ami": "ami-0515e5c0ffee", "architecture": "amd64"}}},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &gardencorev1beta1.CloudProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "CloudProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: "aws"},
		Spec: gardencorev1beta1.CloudProfileSpec{
			Type:    "aws",
			Regions: []gardencorev1beta1.Region{{Name: "eu-west-1", Zones: []gardencorev1beta1.AvailabilityZone{{Name: "eu-west-1a"}}}},
			Bastion: bastion,
			MachineTypes: []gardencorev1beta1.MachineType{
				machine("m5.large", "2", "amd64"), machine("t4g.nano", "2", "arm64"), machine("c5.large", "1500m", "amd64"),
			},
			MachineImages: []gardencorev1beta1.MachineImage{
				{Name: "gardenlinux", Versions: []gardencorev1beta1.MachineImageVersion{
					version("1592.1.0", &supported, "amd64", "arm64"),
					version("1877.3.0", &supported, "amd64", "arm64"),
					version("1900.0.0", &preview, "amd64", "arm64"),
				}},
				{Name: "suse-chost", Versions: []gardencorev1beta1.MachineImageVersion{version("15.6.20250101", &supported, "amd64")}},
			},
			ProviderConfig: &runtime.RawExtension{Raw: config},
		},
	}
}

// TestBastionAsGardenletRendersOnAWS: `terraseed render` of the aws Bastion gardenlet's
// bastion controller creates, with the Cluster of Gardener's types, runs the machine type
// and image Gardener's own bastion helper (extensions/pkg/bastion) picks from the
// CloudProfile, by the AMI the CloudProfileConfig gives; terraform fmt leaves the files
// alone and terraform validate accepts them with the hashicorp/aws provider, where the
// machine has it. The seed's side is a fake client here: the controller in a seed would
// create the instance in AWS.
func TestBastionAsGardenletRendersOnAWS(t *testing.T) {
	t.Parallel()
	terraseed := buildTerraseed(t)
	amis := map[string]string{
		"gardenlinux/1592.1.0/amd64": "ami-0159210000000000a", "gardenlinux/1592.1.0/arm64": "ami-0159210000000000b",
		"gardenlinux/1877.3.0/amd64": "ami-0187730000000000a", "gardenlinux/1877.3.0/arm64": "ami-0187730000000000b",
		"suse-chost/15.6.20250101/amd64": "ami-0515e5c0ffee",
	}
	for _, c := range []struct {
		name    string
		bastion *gardencorev1beta1.Bastion
	}{
		{"image and machine type named", &gardencorev1beta1.Bastion{
			MachineImage: &gardencorev1beta1.BastionMachineImage{Name: "gardenlinux"}, MachineType: &gardencorev1beta1.BastionMachineType{Name: "t4g.nano"}}},
		{"image and version named", &gardencorev1beta1.Bastion{
			MachineImage: &gardencorev1beta1.BastionMachineImage{Name: "gardenlinux", Version: ptr("1592.1.0")}, MachineType: &gardencorev1beta1.BastionMachineType{Name: "m5.large"}}},
		{"nothing named", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			profile := awsCloudProfile(t, c.bastion)
			want, err := gardenerbastion.GetMachineSpecFromCloudProfile(profile)
			g.Expect(err).NotTo(HaveOccurred())

			dir := t.TempDir()
			bastionFile, clusterFile := filepath.Join(dir, "bastion.yaml"), filepath.Join(dir, "cluster.yaml")
			object, cluster := gardenletAWSBastion(t, profile)
			g.Expect(os.WriteFile(bastionFile, mustJSON(g, object), 0o600)).To(Succeed())
			g.Expect(os.WriteFile(clusterFile, mustJSON(g, cluster), 0o600)).To(Succeed())
			out, err := exec.Command(terraseed, "render", "-f", bastionFile, "-cluster", clusterFile).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s", out)
			files := renderedSections(string(out))

			var tfvars map[string]any
			g.Expect(json.Unmarshal([]byte(files["terraform.tfvars.json"]), &tfvars)).To(Succeed())
			g.Expect(tfvars).To(HaveKeyWithValue("instance_type", want.MachineTypeName), "Gardener's machine type")
			g.Expect(tfvars).To(HaveKeyWithValue("image_id", amis[want.ImageBaseName+"/"+want.ImageVersion+"/"+want.Architecture]),
				"the AMI of Gardener's image %s %s for %s", want.ImageBaseName, want.ImageVersion, want.Architecture)
			g.Expect(tfvars).To(HaveKeyWithValue("user_data", base64.StdEncoding.EncodeToString(object.Spec.UserData)), "gardenlet's user data")
			g.Expect(tfvars).To(HaveKeyWithValue("cluster_name", "shoot--compat--aws"))
			g.Expect(files["main.tf"]).To(ContainSubstring(`data "aws_subnets" "public_utility_z0"`), "the shoot's subnet is looked up")
			expectFormatted(t, files)
		})
	}
}

// buildTerraseed builds the terraseed command for this test.
func buildTerraseed(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "terraseed")
	build := exec.Command("go", "build", "-o", bin, "./cmd/terraseed")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/terraseed: %v\n%s", err, out)
	}
	return bin
}

// renderedSections splits what `terraseed render` prints into its files, up to the
// environment.
func renderedSections(out string) map[string]string {
	files := map[string]string{}
	for _, section := range strings.Split(out, "# ---- ")[1:] {
		name, content, _ := strings.Cut(section, "\n")
		if strings.HasPrefix(name, "environment") {
			break
		}
		files[name] = content
	}
	return files
}

// gardenletAWSBastion runs gardenlet's bastion controller for an aws shoot once, with
// fake clients on both sides, and returns the Bastion it writes to the seed and the
// shoot's Cluster, as gardenlet writes it.
func gardenletAWSBastion(t *testing.T, profile *gardencorev1beta1.CloudProfile) (*gardenextensionsv1alpha1.Bastion, *gardenextensionsv1alpha1.Cluster) {
	t.Helper()
	g := NewWithT(t)
	ctx := ctrllog.IntoContext(context.Background(), testr.New(t))
	sh := &shootInSeed{t: t, shoot: &gardencorev1beta1.Shoot{
		TypeMeta:   metav1.TypeMeta{APIVersion: "core.gardener.cloud/v1beta1", Kind: "Shoot"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "garden-compat", Name: "aws"},
		Spec: gardencorev1beta1.ShootSpec{
			CloudProfile: &gardencorev1beta1.CloudProfileReference{Kind: "CloudProfile", Name: profile.Name},
			Provider:     gardencorev1beta1.Provider{Type: "aws"},
			Region:       "eu-west-1",
		},
		Status: gardencorev1beta1.ShootStatus{TechnicalID: "shoot--compat--aws"},
	}}
	garden, request := bastionGarden(t, sh, "cli-aws", "aws")
	seed := fake.NewClientBuilder().WithScheme(seedScheme()).Build()
	r := &bastioncontroller.Reconciler{GardenClient: garden, SeedClient: seed, Clock: clock.RealClock{}}
	_, err := r.Reconcile(ctx, request)
	g.Expect(err).NotTo(HaveOccurred())

	object := &gardenextensionsv1alpha1.Bastion{}
	g.Expect(seed.Get(ctx, client.ObjectKey{Namespace: sh.shoot.Status.TechnicalID, Name: request.Name}, object)).To(Succeed())
	g.Expect(object.Spec.ProviderConfig).To(BeNil())
	object.TypeMeta = metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "Bastion"}
	// What the API server keeps and the wire carries: the rest is the fake client's.
	object.ObjectMeta = metav1.ObjectMeta{Name: object.Name, Namespace: object.Namespace, Annotations: object.Annotations}

	cluster := &gardenextensionsv1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: sh.shoot.Status.TechnicalID},
		Spec: gardenextensionsv1alpha1.ClusterSpec{
			CloudProfile: runtime.RawExtension{Raw: mustJSON(g, profile)},
			Seed:         &runtime.RawExtension{Raw: []byte(`{"apiVersion":"core.gardener.cloud/v1beta1","kind":"Seed","metadata":{"name":"aws-eu1"}}`)},
			Shoot:        runtime.RawExtension{Raw: mustJSON(g, sh.shoot)},
		},
	}
	return object, cluster
}

func mustJSON(g Gomega, v any) []byte {
	raw, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return raw
}

// expectFormatted writes the rendered files and checks that terraform fmt leaves them
// alone, with the terraform the tests run.
func expectFormatted(t *testing.T, files map[string]string) {
	t.Helper()
	g := NewWithT(t)
	terraform := os.Getenv("TERRASEED_TERRAFORM")
	g.Expect(terraform).NotTo(BeEmpty(), "TERRASEED_TERRAFORM is not set: run `make test`, or eval \"$(make -s env)\" first")
	dir := t.TempDir()
	for name, content := range files {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600)).To(Succeed())
	}
	fmtOut, err := exec.Command(terraform, "fmt", "-check", "-diff", dir).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "terraform fmt changes the rendered files:\n%s", fmtOut)
	testenv.ValidateWithAWSProvider(t, terraform, dir)
}
