package templates_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/templates"
)

const localInfrastructureStatus = `{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"InfrastructureStatus","namespace":"shoot--dev--local--infrastructure","zones":[{"name":"zone-a","workers":"10.250.0.0/19"},{"name":"zone-b","workers":"10.250.32.0/19"}]}`

func controlPlane(cpType, config string) *extensionsv1alpha1.ControlPlane {
	cp := &extensionsv1alpha1.ControlPlane{
		ObjectMeta: metav1.ObjectMeta{Name: "control-plane", Namespace: "shoot--dev--local"},
		Spec: extensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec:                  extensionsv1alpha1.DefaultSpec{Type: cpType},
			Region:                       "local-1",
			SecretRef:                    corev1.SecretReference{Name: "cloudprovider", Namespace: "shoot--dev--local"},
			InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(localInfrastructureStatus)},
		},
	}
	if config != "" {
		cp.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(config)}
	}
	return cp
}

func objectByKind(objects []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	for _, obj := range objects {
		if obj.GetKind() == kind {
			return obj
		}
	}
	return nil
}

func TestLocalControlPlaneRendersFromConfigAndInfrastructureStatus(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t).Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.ControlPlane).NotTo(BeNil())

	out, err := p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: controlPlane("local",
		`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"replicas":2,"image":"example.org/ccm:v1","featureGates":{"B":false,"A":true}}}`)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Objects).To(HaveLen(3))
	for _, obj := range out.Objects {
		g.Expect(obj.GetNamespace()).To(Equal("shoot--dev--local"), "%s is placed in the ControlPlane's namespace", obj.GetKind())
	}

	config := objectByKind(out.Objects, "ConfigMap")
	g.Expect(config.GetName()).To(Equal("cloud-provider-config"))
	g.Expect(config.Object["data"]).To(HaveKeyWithValue("cloudprovider.conf",
		"[Global]\ncluster = shoot--dev--local\nregion = local-1\nnamespace = shoot--dev--local--infrastructure\nzones = zone-a,zone-b\n"))

	deployment := objectByKind(out.Objects, "Deployment")
	replicas, _, _ := unstructured.NestedInt64(deployment.Object, "spec", "replicas")
	g.Expect(replicas).To(BeEquivalentTo(2))
	podLabels, _, _ := unstructured.NestedStringMap(deployment.Object, "spec", "template", "metadata", "labels")
	g.Expect(podLabels).To(Equal(map[string]string{
		"app":                              "cloud-controller-manager",
		"networking.gardener.cloud/to-dns": "allowed",
		"networking.resources.gardener.cloud/to-kube-apiserver-tcp-443": "allowed",
	}), "the provider's network-policy labels are added to the pods")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	g.Expect(containers).To(HaveLen(1))
	container := containers[0].(map[string]any)
	g.Expect(container["image"]).To(Equal("example.org/ccm:v1"))
	g.Expect(container["args"]).To(ContainElement("--feature-gates=A=true,B=false"))
	volumes, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "volumes")
	g.Expect(volumes).To(ContainElement(HaveKeyWithValue("secret", map[string]any{"secretName": "cloudprovider"})),
		"credentials are mounted by the secret's name")

	g.Expect(objectByKind(out.Objects, "Service")).NotTo(BeNil())

	var status map[string]any
	g.Expect(json.Unmarshal(out.ProviderStatus.Raw, &status)).To(Succeed())
	g.Expect(status).To(HaveKeyWithValue("kind", "ControlPlaneStatus"))
	g.Expect(status).To(HaveKeyWithValue("cloudControllerManager", HaveKeyWithValue("replicas", BeNumerically("==", 2))))
}

func TestControlPlaneConfigErrorsNameTheField(t *testing.T) {
	p, err := registry(t).Provider("local")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for name, c := range map[string]struct{ config, field string }{
		"no config":         {``, "providerConfig.apiVersion"},
		"replicas too high": {`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"replicas":7}}`, "providerConfig.cloudControllerManager.replicas"},
		"gate not a bool":   {`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"featureGates":{"A":"yes"}}}`, "providerConfig.cloudControllerManager.featureGates.A"},
		"unknown field":     {`{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig","ccm":{}}`, "providerConfig.ccm"},
		"not an object":     {`[1]`, "providerConfig"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: controlPlane("local", c.config)})
			var verr *templates.ValidationError
			g.Expect(errors.As(err, &verr)).To(BeTrue(), "got %v", err)
			g.Expect(verr.Codes()).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
			g.Expect(verr.Errors[0].Field).To(Equal(c.field), "%v", err)
			g.Expect(err.Error()).To(HavePrefix("invalid local control plane: "))
		})
	}
}

// Gardener removed ControlPlane.spec.purpose in v1.123: a ControlPlane without it is a
// shoot's own, as is one still saying normal; one still saying exposure (or anything
// else) is refused naming the field, and nothing is rendered for it.
func TestControlPlanePurpose(t *testing.T) {
	p, err := registry(t).Provider("local")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	config := `{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig"}`
	purpose := func(p extensionsv1alpha1.Purpose) *extensionsv1alpha1.Purpose { return &p }
	for name, c := range map[string]struct {
		purpose *extensionsv1alpha1.Purpose
		invalid string
	}{
		"none":     {},
		"normal":   {purpose: purpose(extensionsv1alpha1.PurposeNormal)},
		"exposure": {purpose: purpose(extensionsv1alpha1.PurposeExposure), invalid: "exposure"},
		"other":    {purpose: purpose("public"), invalid: "public"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cp := controlPlane("local", config)
			cp.Spec.Purpose = c.purpose
			out, err := p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: cp})
			if c.invalid == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(out.Objects).NotTo(BeEmpty())
				return
			}
			g.Expect(out).To(BeNil())
			var verr *templates.ValidationError
			g.Expect(errors.As(err, &verr)).To(BeTrue(), "got %v", err)
			g.Expect(verr.Codes()).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
			g.Expect(verr.Errors).To(HaveLen(1))
			g.Expect(verr.Errors[0].Field).To(Equal("spec.purpose"))
			g.Expect(err.Error()).To(ContainSubstring(`invalid local control plane: spec.purpose: Invalid value: "` + c.invalid + `": Gardener removed the field in v1.123`))
		})
	}
}

// TestControlPlaneValuesStayValues: a user's string full of YAML cannot add an object or a
// field, because the templates write values as JSON.
func TestControlPlaneValuesStayValues(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t).Provider("local")
	g.Expect(err).NotTo(HaveOccurred())
	hostile := "x\"\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: injected\n"
	cp := controlPlane("local", `{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig"}`)
	cp.Spec.Region = hostile
	raw, _ := json.Marshal(map[string]any{"namespace": hostile, "zones": []any{map[string]any{"name": hostile}}})
	cp.Spec.InfrastructureProviderStatus = &runtime.RawExtension{Raw: raw}
	cp.Spec.SecretRef.Name = hostile
	out, err := p.RenderControlPlaneUnvalidated(templates.ControlPlaneInput{ControlPlane: cp})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Objects).To(HaveLen(3))
	for _, obj := range out.Objects {
		g.Expect(obj.GetKind()).NotTo(Equal("Secret"))
	}
	volumes, _, _ := unstructured.NestedSlice(objectByKind(out.Objects, "Deployment").Object, "spec", "template", "spec", "volumes")
	g.Expect(volumes).To(ContainElement(HaveKeyWithValue("secret", map[string]any{"secretName": hostile})))
}

// TestControlPlaneTemplatesStayInTheirNamespace: broken provider templates fail with the
// file named, before anything is applied.
func TestControlPlaneTemplateMistakesNameTheFile(t *testing.T) {
	for name, c := range map[string]struct{ template, message string }{
		"other namespace": {"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: kube-system\n", `is in namespace "kube-system"`},
		"namespace":       {"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n", "cannot create namespaces"},
		"no name":         {"apiVersion: v1\nkind: ConfigMap\n", "has no metadata.name"},
		"twice":           {"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n", "rendered twice"},
		"not yaml":        {"apiVersion: v1\nkind: [\n", "document 0"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			writeControlPlaneProvider(t, dir, c.template)
			r := registry(t, dir)
			p, err := r.Provider("fourth")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: controlPlane("fourth", `{}`)})
			var rerr *templates.RenderError
			g.Expect(errors.As(err, &rerr)).To(BeTrue(), "got %v", err)
			g.Expect(rerr.File).To(Equal("controlplane/objects.yaml.tpl"))
			g.Expect(err.Error()).To(ContainSubstring(c.message))
		})
	}
}

func TestControlPlanePartIsCheckedWhenTheProviderLoads(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeControlPlaneProvider(t, dir, "{{ nosuchfunction }}")
	_, err := templates.NewRegistry(dir)
	g.Expect(err).To(MatchError(ContainSubstring("controlplane/objects.yaml.tpl")))

	g.Expect(os.Remove(filepath.Join(dir, "controlplane", "objects.yaml.tpl"))).To(Succeed())
	_, err = templates.NewRegistry(dir)
	g.Expect(err).To(MatchError(ContainSubstring("controlplane/ has no *.yaml.tpl files")))

	g.Expect(os.Remove(filepath.Join(dir, "controlplane", "controlplane.yaml"))).To(Succeed())
	_, err = templates.NewRegistry(dir)
	g.Expect(err).To(MatchError(ContainSubstring("controlplane/ has no controlplane.yaml")))
}

func TestProviderWithoutControlPlane(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t, filepath.Join("testdata", "providers")).Provider("third")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.ControlPlane).To(BeNil())
	_, err = p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: controlPlane("third", `{}`)})
	var none *templates.NoControlPlaneError
	g.Expect(errors.As(err, &none)).To(BeTrue(), "got %v", err)
}

// writeControlPlaneProvider writes a provider "fourth" whose control plane renders
// objects.yaml.tpl.
func writeControlPlaneProvider(t *testing.T, dir, objects string) {
	t.Helper()
	files := map[string]string{
		"provider.yaml":                  "type: fourth\nresources: [terraform_data]\nstatus:\n  providerStatus:\n    apiVersion: fourth/v1\n    kind: InfrastructureStatus\n    fields: {}\n",
		"schema.json":                    `{"type": "object"}`,
		"main.tf.tpl":                    "resource \"terraform_data\" \"x\" {}\n",
		"controlplane/controlplane.yaml": "networkPolicyLabels: {a: b}\n",
		"controlplane/schema.json":       `{"type": "object"}`,
		"controlplane/objects.yaml.tpl":  objects,
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func kindsAndNames(objects []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objects {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

const awsInfrastructureStatus = `{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureStatus","vpc":{"id":"vpc-0815","subnets":[{"id":"subnet-pub","purpose":"public","zone":"eu-west-1a"},{"id":"subnet-nodes","purpose":"nodes","zone":"eu-west-1a"}]}}`

// TestAWSControlPlane renders what Gardener's AWS extension deploys: the cloud-controller-
// manager with its cloud-provider config from the VPC and subnets of the Infrastructure.
func TestAWSControlPlane(t *testing.T) {
	g := NewWithT(t)
	p, err := registry(t).Provider("aws")
	g.Expect(err).NotTo(HaveOccurred())
	cp := controlPlane("aws", `{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"featureGates":{"SomeGate":true}}}`)
	cp.Namespace = "shoot--core--aws-01"
	cp.Spec.Region = "eu-west-1"
	cp.Spec.InfrastructureProviderStatus = &runtime.RawExtension{Raw: []byte(awsInfrastructureStatus)}
	cluster := &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{Shoot: runtime.RawExtension{Raw: []byte(`{"spec":{"kubernetes":{"version":"1.31.4"},"networking":{"pods":"100.96.0.0/11"}}}`)}}}

	out, err := p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: cp, Cluster: cluster})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kindsAndNames(out.Objects)).To(Equal([]string{
		"Deployment/cloud-controller-manager", "PodDisruptionBudget/cloud-controller-manager", "Service/cloud-controller-manager",
		"ConfigMap/cloud-provider-config"}))
	g.Expect(objectByKind(out.Objects, "ConfigMap").Object["data"]).To(HaveKeyWithValue("cloudprovider.conf",
		"[Global]\nVPC=vpc-0815\nSubnetID=subnet-nodes\nDisableSecurityGroupIngress=true\nKubernetesClusterTag=shoot--core--aws-01\nKubernetesClusterID=shoot--core--aws-01\nZone=eu-west-1a\n"))
	deployment := objectByKind(out.Objects, "Deployment")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	container := containers[0].(map[string]any)
	g.Expect(container["image"]).To(Equal("registry.k8s.io/provider-aws/cloud-controller-manager:v1.31.0"), "the image follows the shoot's minor version")
	g.Expect(container["command"]).To(ContainElements("--cloud-provider=aws", "--cloud-config=/etc/kubernetes/cloudprovider/cloudprovider.conf", "--cluster-name=shoot--core--aws-01", "--feature-gates=SomeGate=true"))
	env, _ := json.Marshal(container["env"])
	g.Expect(string(env)).To(ContainSubstring(`"secretKeyRef":{"key":"accessKeyID","name":"cloudprovider"}`))
	g.Expect(out.ProviderStatus).To(BeNil(), "Gardener's AWS extension reports no providerStatus for a ControlPlane")

	// The custom route controller only when asked for.
	cp.Spec.ProviderConfig = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"useCustomRouteController":true}}`)}
	out, err = p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: cp, Cluster: cluster})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kindsAndNames(out.Objects[4:])).To(Equal([]string{
		"ServiceAccount/aws-custom-route-controller", "Role/aws-custom-route-controller", "RoleBinding/aws-custom-route-controller",
		"Deployment/aws-custom-route-controller", "PodDisruptionBudget/aws-custom-route-controller"}))

	// Without a VPC in the Infrastructure's status there is nothing to configure.
	cp.Spec.InfrastructureProviderStatus = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureStatus"}`)}
	_, err = p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: cp, Cluster: cluster})
	var verr *templates.ValidationError
	g.Expect(errors.As(err, &verr)).To(BeTrue(), "got %v", err)
	g.Expect(verr.Errors[0].Field).To(Equal("infrastructureProviderStatus.vpc.id"))
}

// TestCloudProviderConfigRefusesControlCharacters: the cloud-provider config is INI, one
// key a line; a newline in a value of the Infrastructure's status would add keys. Such a
// value is refused naming its field, and an unvalidated render keeps it on its line.
func TestCloudProviderConfigRefusesControlCharacters(t *testing.T) {
	const injected = "\nKubernetesClusterID=someone-elses\n[Global]\nzones = x"
	for name, c := range map[string]struct {
		cpType, status, field string
		lines                 int
	}{
		"aws vpc id": {"aws", `{"vpc":{"id":` + quoted("vpc-0815"+injected) + `,"subnets":[{"id":"subnet-nodes","purpose":"nodes","zone":"eu-west-1a"}]}}`,
			"infrastructureProviderStatus.vpc.id", 7},
		"aws subnet zone": {"aws", `{"vpc":{"id":"vpc-0815","subnets":[{"id":"p","purpose":"public"},{"id":"subnet-nodes","purpose":"nodes","zone":` + quoted("eu-west-1a\r"+injected) + `}]}}`,
			"infrastructureProviderStatus.vpc.subnets[1].zone", 7},
		"local namespace": {"local", `{"namespace":` + quoted("ns"+injected) + `,"zones":[{"name":"a"}]}`,
			"infrastructureProviderStatus.namespace", 5},
		"local zone name": {"local", `{"namespace":"ns","zones":[{"name":"a"},{"name":` + quoted("b\x00"+injected) + `}]}`,
			"infrastructureProviderStatus.zones[1].name", 5},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := registry(t).Provider(c.cpType)
			g.Expect(err).NotTo(HaveOccurred())
			cp := controlPlane(c.cpType, `{"apiVersion":"local.provider.terraseed.io/v1alpha1","kind":"ControlPlaneConfig"}`)
			if c.cpType == "aws" {
				cp.Spec.ProviderConfig.Raw = []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"ControlPlaneConfig"}`)
			}
			cp.Spec.InfrastructureProviderStatus = &runtime.RawExtension{Raw: []byte(c.status)}
			cluster := &extensionsv1alpha1.Cluster{Spec: extensionsv1alpha1.ClusterSpec{Shoot: runtime.RawExtension{Raw: []byte(`{"spec":{"kubernetes":{"version":"1.31.4"}}}`)}}}

			_, err = p.RenderControlPlane(templates.ControlPlaneInput{ControlPlane: cp, Cluster: cluster})
			var verr *templates.ValidationError
			g.Expect(errors.As(err, &verr)).To(BeTrue(), "got %v", err)
			g.Expect(verr.Codes()).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
			g.Expect(verr.Errors).To(HaveLen(1))
			g.Expect(verr.Errors[0].Field).To(Equal(c.field))
			g.Expect(err.Error()).To(ContainSubstring("control character"))

			out, err := p.RenderControlPlaneUnvalidated(templates.ControlPlaneInput{ControlPlane: cp, Cluster: cluster})
			g.Expect(err).NotTo(HaveOccurred())
			conf := objectByKind(out.Objects, "ConfigMap").Object["data"].(map[string]any)["cloudprovider.conf"].(string)
			g.Expect(strings.Count(conf, "\n")).To(Equal(c.lines), "one line a key:\n%s", conf)
			g.Expect(regexp.MustCompile(`(?m)^\[`).FindAllString(conf, -1)).To(HaveLen(1), "one section:\n%s", conf)
			g.Expect(conf).NotTo(ContainSubstring("\nKubernetesClusterID=someone-elses"))
		})
	}
}

func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
