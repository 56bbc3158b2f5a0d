package compat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

func gardenerInfrastructure() *gardenextensionsv1alpha1.Infrastructure {
	now := metav1.NewTime(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
	class := gardenextensionsv1alpha1.ExtensionClassShoot
	return &gardenextensionsv1alpha1.Infrastructure{
		TypeMeta: metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "Infrastructure"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "infrastructure", Namespace: "shoot--foobar--aws",
			Annotations: map[string]string{"gardener.cloud/operation": "reconcile"},
		},
		Spec: gardenextensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: gardenextensionsv1alpha1.DefaultSpec{
				Type:           "aws",
				Class:          &class,
				ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureConfig","networks":{"vpc":{"cidr":"10.250.0.0/16"}}}`)},
			},
			Region:       "eu-west-1",
			SecretRef:    corev1.SecretReference{Name: "cloudprovider", Namespace: "shoot--foobar--aws"},
			SSHPublicKey: []byte("ssh-rsa AAAA terraseed"),
		},
		Status: gardenextensionsv1alpha1.InfrastructureStatus{
			DefaultStatus: gardenextensionsv1alpha1.DefaultStatus{
				ProviderStatus: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureStatus","vpc":{"id":"vpc-0815"}}`)},
				Conditions: []gardencorev1beta1.Condition{{
					Type: "Ready", Status: gardencorev1beta1.ConditionFalse,
					LastTransitionTime: now, LastUpdateTime: now,
					Reason: "ReconcileFailed", Message: "quota", Codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraQuotaExceeded},
				}},
				LastError: &gardencorev1beta1.LastError{
					Description: "Error: VpcLimitExceeded", TaskID: ptr("task"),
					Codes:          []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraQuotaExceeded},
					LastUpdateTime: &now,
				},
				LastOperation: &gardencorev1beta1.LastOperation{
					Description: "reconciling", LastUpdateTime: now, Progress: 50,
					State: gardencorev1beta1.LastOperationStateError, Type: gardencorev1beta1.LastOperationTypeReconcile,
				},
				ObservedGeneration: 3,
				State:              &runtime.RawExtension{Raw: []byte(`{"data":{"vpcID":"vpc-0815"}}`)},
				Resources: []gardencorev1beta1.NamedResourceReference{{
					Name:        "state",
					ResourceRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "infrastructure.infra.tf-state"},
				}},
			},
			NodesCIDR:   ptr("10.250.0.0/16"),
			EgressCIDRs: []string{"52.1.2.3/32"},
			Networking: &gardenextensionsv1alpha1.InfrastructureStatusNetworking{
				Pods: []string{"100.96.0.0/11"}, Nodes: []string{"10.250.0.0/16"}, Services: []string{"100.64.0.0/13"},
			},
		},
	}
}

func gardenerControlPlane() *gardenextensionsv1alpha1.ControlPlane {
	now := metav1.NewTime(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
	class := gardenextensionsv1alpha1.ExtensionClassShoot
	return &gardenextensionsv1alpha1.ControlPlane{
		TypeMeta: metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "ControlPlane"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "foobar", Namespace: "shoot--foobar--aws",
			Annotations: map[string]string{"gardener.cloud/operation": "reconcile"},
		},
		Spec: gardenextensionsv1alpha1.ControlPlaneSpec{
			DefaultSpec: gardenextensionsv1alpha1.DefaultSpec{
				Type:           "aws",
				Class:          &class,
				ProviderConfig: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"ControlPlaneConfig","cloudControllerManager":{"featureGates":{"SomeGate":true}}}`)},
			},
			InfrastructureProviderStatus: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"InfrastructureStatus","vpc":{"id":"vpc-0815","subnets":[{"id":"subnet-1","purpose":"nodes","zone":"eu-west-1a"}]}}`)},
			Region:                       "eu-west-1",
			SecretRef:                    corev1.SecretReference{Name: "cloudprovider", Namespace: "shoot--foobar--aws"},
		},
		Status: gardenextensionsv1alpha1.ControlPlaneStatus{
			DefaultStatus: gardenextensionsv1alpha1.DefaultStatus{
				ProviderStatus: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"ControlPlaneStatus"}`)},
				Conditions: []gardencorev1beta1.Condition{{
					Type: "ControlPlaneHealthy", Status: gardencorev1beta1.ConditionFalse,
					LastTransitionTime: now, LastUpdateTime: now,
					Reason: "DeploymentUnhealthy", Message: "cloud-controller-manager has 0 of 1 replicas available",
					Codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem},
				}},
				LastError: &gardencorev1beta1.LastError{
					Description: "spec.providerConfig.cloudControllerManager.replicas: must be at most 3", TaskID: ptr("task"),
					Codes:          []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem},
					LastUpdateTime: &now,
				},
				LastOperation: &gardencorev1beta1.LastOperation{
					Description: "reconciling", LastUpdateTime: now, Progress: 50,
					State: gardencorev1beta1.LastOperationStateError, Type: gardencorev1beta1.LastOperationTypeReconcile,
				},
				ObservedGeneration: 2,
				State:              &runtime.RawExtension{Raw: []byte(`{"inventory":[{"id":"foobar_cloud-controller-manager_apps_Deployment","v":"v1"}]}`)},
				Resources: []gardencorev1beta1.NamedResourceReference{{
					Name:        "cloud-provider-config",
					ResourceRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cloud-provider-config"},
				}},
			},
		},
	}
}

func gardenerCluster() *gardenextensionsv1alpha1.Cluster {
	return &gardenextensionsv1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--foobar--aws"},
		Spec: gardenextensionsv1alpha1.ClusterSpec{
			CloudProfile: runtime.RawExtension{Raw: []byte(`{"kind":"CloudProfile"}`)},
			Seed:         &runtime.RawExtension{Raw: []byte(`{"kind":"Seed"}`)},
			Shoot:        runtime.RawExtension{Raw: []byte(`{"kind":"Shoot","spec":{"networking":{"pods":"100.96.0.0/11"}}}`)},
		},
	}
}

// roundTrip encodes theirs, strictly decodes it into ours, encodes ours and strictly
// decodes that into a fresh value of their type.
func roundTrip(g Gomega, theirs, ours, back any) {
	wire, err := json.Marshal(theirs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strictDecode(wire, ours)).To(Succeed(), "Gardener's JSON decodes into terraseed's types")
	wire2, err := json.Marshal(ours)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wire2).To(MatchJSON(wire), "terraseed encodes the same JSON")
	g.Expect(strictDecode(wire2, back)).To(Succeed(), "terraseed's JSON decodes into Gardener's types")
	// metav1.Time decodes into the local zone, so compare as the API machinery does.
	g.Expect(equality.Semantic.DeepEqual(back, theirs)).To(BeTrue(), "Gardener's object survives the trip unchanged:\n%s", cmp.Diff(theirs, back))
}

func TestInfrastructureIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerInfrastructure()
	g.Expect(unsetFields(reflect.ValueOf(theirs).Elem(), "Infrastructure")).To(BeEmpty(), "the fixture must set every field Gardener has")
	roundTrip(g, theirs, &extensionsv1alpha1.Infrastructure{}, &gardenextensionsv1alpha1.Infrastructure{})
}

func TestControlPlaneIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerControlPlane()
	g.Expect(unsetFields(reflect.ValueOf(theirs).Elem(), "ControlPlane")).To(BeEmpty(), "the fixture must set every field Gardener has")
	roundTrip(g, theirs, &extensionsv1alpha1.ControlPlane{}, &gardenextensionsv1alpha1.ControlPlane{})
}

func TestClusterIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerCluster()
	g.Expect(unsetFields(reflect.ValueOf(theirs.Spec), "Cluster.spec")).To(BeEmpty())
	roundTrip(g, theirs, &extensionsv1alpha1.Cluster{}, &gardenextensionsv1alpha1.Cluster{})
}

// Gardener v1.117.0's wire objects, encoded from this package's fixtures at that version
// (every field set, ControlPlane's purpose and Cluster's required seed included): terraseed
// still decodes each strictly and encodes it unchanged, so a seed of that Gardener works.
func TestGardenerV1117ObjectsAreWireCompatible(t *testing.T) {
	for _, c := range []struct {
		file string
		ours any
	}{
		{"infrastructure.json", &extensionsv1alpha1.Infrastructure{}},
		{"controlplane.json", &extensionsv1alpha1.ControlPlane{}},
		{"cluster.json", &extensionsv1alpha1.Cluster{}},
	} {
		t.Run(c.file, func(t *testing.T) {
			g := NewWithT(t)
			wire, err := os.ReadFile(filepath.Join("testdata", "gardener-v1.117.0", c.file))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strictDecode(wire, c.ours)).To(Succeed(), "Gardener v1.117.0's JSON decodes into terraseed's types")
			back, err := json.Marshal(c.ours)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(back).To(MatchJSON(wire), "terraseed encodes the same JSON")
		})
	}
}

func strictDecode(data []byte, into any) error {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	return decoder.Decode(into)
}

// unsetFields lists the zero-valued fields of the spec and status, so that a field Gardener
// adds in a later version cannot slip past this test unset. Object metadata is not ours.
func unsetFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return unsetFields(v.Elem(), path)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(metav1.Time{}) || v.Type() == reflect.TypeOf(runtime.RawExtension{}) {
			if v.IsZero() {
				return []string{path}
			}
			return nil
		}
		var unset []string
		for i := 0; i < v.NumField(); i++ {
			field := v.Type().Field(i)
			if field.Type == reflect.TypeOf(metav1.TypeMeta{}) || field.Type == reflect.TypeOf(metav1.ObjectMeta{}) {
				continue
			}
			unset = append(unset, unsetFields(v.Field(i), path+"."+field.Name)...)
		}
		return unset
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct {
			return unsetFields(v.Index(0), path+"[0]")
		}
		return nil
	default:
		if v.IsZero() {
			return []string{path}
		}
		return nil
	}
}

func ptr[T any](v T) *T { return &v }

// The seed serves terraseed's CRD for every kind terraseed has one for, not Gardener's.
func TestSeedServesTerraseedsCRDs(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s := seedFor(t)
	scheme := runtime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(s.env.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	files, err := filepath.Glob(filepath.Join(repoRoot(), "charts", "terraseed", "crds", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(ContainElement(HaveSuffix("extensions.gardener.cloud_controlplanes.yaml")))
	for _, file := range files {
		data, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred())
		ours := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.UnmarshalStrict(data, ours)).To(Succeed(), file)
		served := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(ours), served)).To(Succeed())
		g.Expect(served.Spec.Versions).To(HaveLen(len(ours.Spec.Versions)), ours.Name)
		for i, version := range ours.Spec.Versions {
			g.Expect(equality.Semantic.DeepEqual(served.Spec.Versions[i].Schema, version.Schema)).To(BeTrue(),
				"the seed serves %s from %s:\n%s", ours.Name, filepath.Base(file), cmp.Diff(version.Schema, served.Spec.Versions[i].Schema))
			g.Expect(served.Spec.Versions[i].AdditionalPrinterColumns).To(Equal(version.AdditionalPrinterColumns), ours.Name)
		}
	}
}
