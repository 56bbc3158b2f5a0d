package templates_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

// gardenletBastion is an aws Bastion as gardenlet's bastion controller creates it: its
// type, the user data and the ingress blocks, and no providerConfig.
func gardenletBastion() *extensionsv1alpha1.Bastion {
	b := awsBastion("")
	b.Spec.ProviderConfig = nil
	return b
}

// gardenerCloudProfile is an aws CloudProfile as the Gardener API serves it (defaulted)
// and gardenlet copies it into the Cluster, with the AWS extension's CloudProfileConfig;
// change edits its spec before it is encoded.
func gardenerCloudProfile(t *testing.T, change func(spec map[string]any)) []byte {
	t.Helper()
	var spec map[string]any
	if err := json.Unmarshal([]byte(`{
		"type": "aws",
		"regions": [{"name": "eu-west-1", "zones": [{"name": "eu-west-1a"}]}],
		"bastion": {"machineImage": {"name": "gardenlinux"}, "machineType": {"name": "t4g.nano"}},
		"machineTypes": [
			{"name": "m5.large", "cpu": "2", "gpu": "0", "memory": "8Gi", "architecture": "amd64", "usable": true},
			{"name": "t3.micro", "cpu": "2", "gpu": "0", "memory": "1Gi", "architecture": "amd64", "usable": false},
			{"name": "t4g.nano", "cpu": "2", "gpu": "0", "memory": "512Mi", "architecture": "arm64", "usable": true},
			{"name": "c5.large", "cpu": "1", "gpu": "0", "memory": "4Gi", "architecture": "amd64", "usable": true},
			{"name": "c5.xlarge", "cpu": "1500m", "gpu": "0", "memory": "4Gi", "architecture": "amd64", "usable": true}
		],
		"machineImages": [
			{"name": "suse-chost", "versions": [{"version": "15.6.20250101", "architectures": ["amd64"], "classification": "supported"}]},
			{"name": "gardenlinux", "versions": [
				{"version": "1592.1.0", "architectures": ["amd64", "arm64"], "classification": "supported"},
				{"version": "1877.3.0", "architectures": ["amd64", "arm64"], "classification": "supported"},
				{"version": "1899.0.0", "architectures": ["amd64", "arm64"], "classification": "supported", "expirationDate": "2020-01-01T00:00:00Z"},
				{"version": "1900.0.0", "architectures": ["amd64", "arm64"], "classification": "preview"},
				{"version": "1901.0.0", "architectures": ["amd64"], "lifecycle": [{"classification": "preview"}, {"classification": "supported", "startTime": "2099-01-01T00:00:00Z"}]}
			]}
		],
		"providerConfig": {
			"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1",
			"kind": "CloudProfileConfig",
			"machineImages": [
				{"name": "suse-chost", "versions": [{"version": "15.6.20250101", "regions": [{"name": "eu-west-1", "ami": "ami-0515e5c0ffee", "architecture": "amd64"}]}]},
				{"name": "gardenlinux", "versions": [
					{"version": "1592.1.0", "regions": [
						{"name": "eu-west-1", "ami": "ami-0159210000000000a", "architecture": "amd64"},
						{"name": "eu-west-1", "ami": "ami-0159210000000000b", "architecture": "arm64"}]},
					{"version": "1877.3.0", "regions": [
						{"name": "eu-central-1", "ami": "ami-0187730000000000c", "architecture": "arm64"},
						{"name": "eu-west-1", "ami": "ami-0187730000000000a", "architecture": "amd64"},
						{"name": "eu-west-1", "ami": "ami-0187730000000000b", "architecture": "arm64"}]},
					{"version": "1900.0.0", "regions": [{"name": "eu-west-1", "ami": "ami-0190000000000000b", "architecture": "arm64"}]}
				]}
			]
		}
	}`), &spec); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(spec)
	}
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile",
		"metadata": map[string]any{"name": "aws"}, "spec": spec,
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// gardenerBastionCluster is the Cluster of an aws shoot in eu-west-1 with the CloudProfile
// gardenerCloudProfile makes.
func gardenerBastionCluster(t *testing.T, change func(spec map[string]any)) *extensionsv1alpha1.Cluster {
	t.Helper()
	c := awsShootCluster(t, "eu-west-1")
	c.Spec.CloudProfile = runtime.RawExtension{Raw: gardenerCloudProfile(t, change)}
	return c
}

// TestAWSBastionAsGardenletRenders: a Bastion with no providerConfig renders with a
// Gardener Cluster: the subnet, VPC and nodes' group are looked up by the names and tags
// the aws Infrastructure gives them, the machine type and image are the CloudProfile's,
// and terraform loads the result with exactly the variables and declared types it needs.
func TestAWSBastionAsGardenletRenders(t *testing.T) {
	g := NewWithT(t)
	r := registry(t)
	k := awsKind(t, r, templates.KindBastion, "aws")
	b := gardenletBastion()
	out, err := k.Render(templates.KindInput{Object: b, Cluster: gardenerBastionCluster(t, nil)})
	g.Expect(err).NotTo(HaveOccurred())

	tfvars := awsTFVars(t, out)
	g.Expect(tfvars).To(HaveKeyWithValue("instance_type", "t4g.nano"), "the CloudProfile's bastion machine type")
	g.Expect(tfvars).To(HaveKeyWithValue("image_id", "ami-0187730000000000b"), "the newest supported gardenlinux for arm64 in eu-west-1")
	g.Expect(tfvars).NotTo(HaveKey("vpc_id"))
	g.Expect(tfvars).NotTo(HaveKey("subnet_id"))

	main := out.Files["main.tf"]
	infra, err := r.Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	infraOut, err := infra.Render(awsInfrastructureInput(t))
	g.Expect(err).NotTo(HaveOccurred())
	// The names the bastion looks for are those the Infrastructure gives.
	g.Expect(infraOut.Files["main.tf"]).To(ContainSubstring(`Name = "${local.cluster_name}-public-utility-z0"`))
	g.Expect(main).To(ContainSubstring(`subnet_name      = "${var.cluster_name}-public-utility-z0"`))
	g.Expect(infraOut.Files["main.tf"]).To(ContainSubstring(`tags         = { "kubernetes.io/cluster/${local.cluster_name}" = "1" }`))
	g.Expect(main).To(ContainSubstring(`cluster_tag      = "kubernetes.io/cluster/${var.cluster_name}"`))
	g.Expect(infraOut.Files["main.tf"]).To(ContainSubstring(`name = "${local.cluster_name}-nodes"`))
	g.Expect(main).To(ContainSubstring(`nodes_group_name = "${var.cluster_name}-nodes"`))

	g.Expect(main).To(MatchRegexp(`subnet_id\s+= local.subnet_id`))
	g.Expect(main).To(MatchRegexp(`security_groups = \[local.nodes_group_id\]`), "the bastion reaches the nodes' group only")
	g.Expect(main).To(ContainSubstring(`resource "aws_security_group_rule" "nodes_ssh_from_bastion"`))
	g.Expect(main).To(ContainSubstring("error_message = \"The bastion runs in the shoot's public subnet of its first zone, the one subnet tagged Name=${local.subnet_name} and ${local.cluster_tag}=1"))
	g.Expect(main).NotTo(ContainSubstring(`data "aws_vpc"`))

	types := checkAWSKindConfig(t, k, out, awsKindCredentials(t, r, k, false))
	g.Expect(types).To(ContainElements("data.aws_subnets", "data.aws_subnet", "data.aws_security_groups", "aws_security_group_rule"))

	out, err = k.Render(templates.KindInput{Object: b, Cluster: gardenerBastionCluster(t, nil), WorkloadIdentity: true})
	g.Expect(err).NotTo(HaveOccurred())
	checkAWSKindModule(t, k, out, awsKindCredentials(t, r, k, true))
}

// awsInfrastructureInput is the first aws Infrastructure case the provider tests render.
func awsInfrastructureInput(t *testing.T) templates.Input {
	t.Helper()
	for _, c := range cases(t, "aws") {
		in := c.input(t)
		if !in.WorkloadIdentity {
			return in
		}
	}
	t.Fatal("no aws Infrastructure case")
	return templates.Input{}
}

// TestAWSBastionAsGardenletTakesTheCloudProfilesMachine: the machine type and image come
// from the CloudProfile as Gardener's extensions choose them, and providerConfig still
// overrides each.
func TestAWSBastionAsGardenletTakesTheCloudProfilesMachine(t *testing.T) {
	k := awsKind(t, registry(t), templates.KindBastion, "aws")
	bastion := func(m map[string]any) map[string]any { return m["bastion"].(map[string]any) }
	for _, c := range []struct {
		name           string
		providerConfig string
		change         func(spec map[string]any)
		instanceType   string
		imageID        string
	}{
		{"named image and version", "", func(s map[string]any) {
			bastion(s)["machineImage"] = map[string]any{"name": "gardenlinux", "version": "1592.1.0"}
		}, "t4g.nano", "ami-0159210000000000b"},
		{"named image, newest supported version of the machine's architecture", "", func(s map[string]any) {
			bastion(s)["machineType"] = map[string]any{"name": "m5.large"}
		}, "m5.large", "ami-0187730000000000a"},
		{"no image named: the first with a supported version", "", func(s map[string]any) {
			bastion(s)["machineType"] = map[string]any{"name": "m5.large"}
			delete(bastion(s), "machineImage")
		}, "m5.large", "ami-0515e5c0ffee"},
		{"no machine type named: the usable one with the fewest CPUs", "", func(s map[string]any) {
			delete(s, "bastion")
		}, "c5.large", "ami-0515e5c0ffee"},
		{"no machine type named, an image named", "", func(s map[string]any) {
			delete(bastion(s), "machineType")
			s["machineImages"] = s["machineImages"].([]any)[1:]
		}, "c5.large", "ami-0187730000000000a"},
		{"providerConfig names the image", `{"imageID": "ami-0c55b159cbfafe1f0"}`, func(s map[string]any) {
			delete(s, "providerConfig")
		}, "t4g.nano", "ami-0c55b159cbfafe1f0"},
		{"providerConfig names the image, the CloudProfile no bastion", `{"imageID": "ami-0c55b159cbfafe1f0"}`, func(s map[string]any) {
			delete(s, "bastion")
		}, "t3.nano", "ami-0c55b159cbfafe1f0"},
		{"providerConfig names the machine type", `{"instanceType": "t4g.small"}`, nil, "t4g.small", "ami-0187730000000000b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			b := gardenletBastion()
			if c.providerConfig != "" {
				b.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(c.providerConfig)}
			}
			out, err := k.Render(templates.KindInput{Object: b, Cluster: gardenerBastionCluster(t, c.change)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("instance_type", c.instanceType))
			g.Expect(awsTFVars(t, out)).To(HaveKeyWithValue("image_id", c.imageID))
		})
	}
}

// TestAWSBastionAsGardenletNamesWhatTheCloudProfileLacks: a Cluster whose CloudProfile
// cannot give the bastion its machine or image is refused, terminally, naming the field
// that lacks it and what was looked for.
func TestAWSBastionAsGardenletNamesWhatTheCloudProfileLacks(t *testing.T) {
	k := awsKind(t, registry(t), templates.KindBastion, "aws")
	bastion := func(m map[string]any) map[string]any { return m["bastion"].(map[string]any) }
	for _, c := range []struct {
		name    string
		cluster func(t *testing.T) *extensionsv1alpha1.Cluster
		want    []string
	}{
		{"machine type not in the CloudProfile", func(t *testing.T) *extensionsv1alpha1.Cluster {
			return gardenerBastionCluster(t, func(s map[string]any) { bastion(s)["machineType"] = map[string]any{"name": "x9.huge"} })
		}, []string{`cluster.spec.cloudProfile.spec.bastion.machineType.name: Invalid value: "x9.huge"`, "spec.machineTypes"}},
		{"image not in the CloudProfile", func(t *testing.T) *extensionsv1alpha1.Cluster {
			return gardenerBastionCluster(t, func(s map[string]any) { bastion(s)["machineImage"] = map[string]any{"name": "flatcar"} })
		}, []string{`cluster.spec.cloudProfile.spec.bastion.machineImage.name: Invalid value: "flatcar"`}},
		{"version not supported", func(t *testing.T) *extensionsv1alpha1.Cluster {
			return gardenerBastionCluster(t, func(s map[string]any) {
				bastion(s)["machineImage"] = map[string]any{"name": "gardenlinux", "version": "1900.0.0"}
			})
		}, []string{`cluster.spec.cloudProfile.spec.bastion.machineImage.version: Invalid value: "1900.0.0"`, "not a supported version of image gardenlinux"}},
		{"no supported version of the machine's architecture", func(t *testing.T) *extensionsv1alpha1.Cluster {
			return gardenerBastionCluster(t, func(s map[string]any) {
				bastion(s)["machineImage"] = map[string]any{"name": "suse-chost"}
			})
		}, []string{"cluster.spec.cloudProfile.spec.machineImages[0].versions", "image suse-chost has no supported version for architecture arm64"}},
		{"no AMI in the region", func(t *testing.T) *extensionsv1alpha1.Cluster {
			c := gardenerBastionCluster(t, nil)
			c.Spec.Shoot.Raw = []byte(strings.Replace(string(c.Spec.Shoot.Raw), "eu-west-1", "us-east-2", 1))
			return c
		}, []string{`cluster.spec.cloudProfile.spec.providerConfig.machineImages: Invalid value: "gardenlinux"`, "gives image gardenlinux version 1877.3.0 no AMI in region us-east-2 for architecture arm64 (the bastion's machine type t4g.nano)"}},
		{"no AMI for the architecture", func(t *testing.T) *extensionsv1alpha1.Cluster {
			return gardenerBastionCluster(t, func(s map[string]any) {
				bastion(s)["machineImage"] = map[string]any{"name": "gardenlinux"}
				bastion(s)["machineType"] = map[string]any{"name": "m5.large"}
				s["providerConfig"] = map[string]any{"machineImages": []any{map[string]any{"name": "gardenlinux", "versions": []any{
					map[string]any{"version": "1877.3.0", "regions": []any{map[string]any{"name": "eu-west-1", "ami": "ami-0187730000000000b", "architecture": "arm64"}}}}}}}
			})
		}, []string{"gives image gardenlinux version 1877.3.0 no AMI in region eu-west-1 for architecture amd64"}},
		{"no providerConfig in the CloudProfile", func(t *testing.T) *extensionsv1alpha1.Cluster {
			return gardenerBastionCluster(t, func(s map[string]any) { delete(s, "providerConfig") })
		}, []string{"cluster.spec.cloudProfile.spec.providerConfig.machineImages", "no AMI in region eu-west-1"}},
		{"an empty CloudProfile", func(t *testing.T) *extensionsv1alpha1.Cluster {
			return awsShootCluster(t, "eu-west-1")
		}, []string{"cluster.spec.cloudProfile.spec.bastion.machineType", "spec.machineTypes has no usable one"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := k.Render(templates.KindInput{Object: gardenletBastion(), Cluster: c.cluster(t)})
			var invalid *templates.ValidationError
			g.Expect(errors.As(err, &invalid)).To(BeTrue(), "got %v", err)
			for _, want := range c.want {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}

	g := NewWithT(t)
	b := gardenletBastion()
	b.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"subnetID": "subnet-0e1f2a3b"}`)}
	_, err := k.Render(templates.KindInput{Object: b, Cluster: gardenerBastionCluster(t, nil)})
	g.Expect(err).To(MatchError(ContainSubstring("vpcID")), "a subnet is given with its VPC")
}

// TestAWSBastionAsGardenletCloudProfileIsNeverHCL: hostile text in the CloudProfile's
// machine type, image and AMI, and in the shoot's namespace and region, leaves the
// rendered HCL byte for byte the same and arrives in the tfvars as the literal value.
func TestAWSBastionAsGardenletCloudProfileIsNeverHCL(t *testing.T) {
	g := NewWithT(t)
	k := awsKind(t, registry(t), templates.KindBastion, "aws")
	h := func(i int) string { return hostile[i%len(hostile)] }
	profile := func(machineType, image, ami string) func(spec map[string]any) {
		return func(s map[string]any) {
			s["bastion"] = map[string]any{"machineImage": map[string]any{"name": image}, "machineType": map[string]any{"name": machineType}}
			s["machineTypes"] = []any{map[string]any{"name": machineType, "cpu": "2", "architecture": "arm64"}}
			s["machineImages"] = []any{map[string]any{"name": image, "versions": []any{map[string]any{"version": "1.0.0", "architectures": []any{"arm64"}}}}}
			s["providerConfig"] = map[string]any{"machineImages": []any{map[string]any{"name": image, "versions": []any{
				map[string]any{"version": "1.0.0", "regions": []any{map[string]any{"name": "eu-west-1", "ami": ami, "architecture": "arm64"}}}}}}}
		}
	}
	clean, err := k.Render(templates.KindInput{Object: gardenletBastion(), Cluster: gardenerBastionCluster(t, profile("t4g.nano", "gardenlinux", "ami-0187730000000000b"))})
	g.Expect(err).NotTo(HaveOccurred())
	dirtyBastion := gardenletBastion()
	dirtyBastion.Namespace = h(3)
	dirty, err := k.Render(templates.KindInput{Object: dirtyBastion, Cluster: gardenerBastionCluster(t, profile(h(0), h(1), h(2)))})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sortedKeys(dirty.Files)).To(Equal(sortedKeys(clean.Files)))
	for name, text := range clean.Files {
		g.Expect(dirty.Files[name]).To(Equal(text), "the CloudProfile's strings changed %s", name)
	}
	tfvars := awsTFVars(t, dirty)
	g.Expect(tfvars).To(HaveKeyWithValue("instance_type", h(0)))
	g.Expect(tfvars).To(HaveKeyWithValue("image_id", h(2)))
	g.Expect(tfvars).To(HaveKeyWithValue("cluster_name", h(3)))
}
