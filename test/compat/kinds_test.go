package compat_test

import (
	"reflect"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// The infrastructure-like kinds besides the Infrastructure: every field Gardener has is
// set, and each survives the trip through terraseed's types unchanged.

func gardenerSpec(providerType string, providerConfig string) gardenextensionsv1alpha1.DefaultSpec {
	class := gardenextensionsv1alpha1.ExtensionClassSeed
	return gardenextensionsv1alpha1.DefaultSpec{
		Type:           providerType,
		Class:          &class,
		ProviderConfig: &runtime.RawExtension{Raw: []byte(providerConfig)},
	}
}

func gardenerStatus(providerStatus, state string) gardenextensionsv1alpha1.DefaultStatus {
	now := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	return gardenextensionsv1alpha1.DefaultStatus{
		ProviderStatus: &runtime.RawExtension{Raw: []byte(providerStatus)},
		Conditions: []gardencorev1beta1.Condition{{
			Type: "Ready", Status: gardencorev1beta1.ConditionFalse,
			LastTransitionTime: now, LastUpdateTime: now,
			Reason: "ReconcileFailed", Message: "throttled", Codes: []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraRateLimitsExceeded},
		}},
		LastError: &gardencorev1beta1.LastError{
			Description: "Error: Throttling", TaskID: ptr("task"),
			Codes:          []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraRateLimitsExceeded},
			LastUpdateTime: &now,
		},
		LastOperation: &gardencorev1beta1.LastOperation{
			Description: "reconciling", LastUpdateTime: now, Progress: 50,
			State: gardencorev1beta1.LastOperationStateError, Type: gardencorev1beta1.LastOperationTypeReconcile,
		},
		ObservedGeneration: 4,
		State:              &runtime.RawExtension{Raw: []byte(state)},
		Resources: []gardencorev1beta1.NamedResourceReference{{
			Name:        "state",
			ResourceRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "state"},
		}},
	}
}

func gardenerBackupBucket() *gardenextensionsv1alpha1.BackupBucket {
	return &gardenextensionsv1alpha1.BackupBucket{
		TypeMeta: metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "BackupBucket"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "8c3e6e5b-5f1a-4c3e-9d43-2c5b0f0e6a11",
			Annotations: map[string]string{"backupbucket.extensions.gardener.cloud/generated-secret-namespace": "garden-seed"},
		},
		Spec: gardenextensionsv1alpha1.BackupBucketSpec{
			DefaultSpec: gardenerSpec("aws", `{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketConfig","immutability":{"retentionType":"bucket","retentionPeriod":"96h"}}`),
			Region:      "eu-west-1",
			SecretRef:   corev1.SecretReference{Name: "backupprovider", Namespace: "garden"},
		},
		Status: gardenextensionsv1alpha1.BackupBucketStatus{
			DefaultStatus:      gardenerStatus(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketStatus"}`, `{"bucket":"b"}`),
			GeneratedSecretRef: &corev1.SecretReference{Name: "generated-bucket-8c3e6e5b", Namespace: "garden-seed"},
		},
	}
}

func gardenerBackupEntry() *gardenextensionsv1alpha1.BackupEntry {
	return &gardenextensionsv1alpha1.BackupEntry{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "BackupEntry"},
		ObjectMeta: metav1.ObjectMeta{Name: "shoot--foobar--aws--1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"},
		Spec: gardenextensionsv1alpha1.BackupEntrySpec{
			DefaultSpec:                gardenerSpec("aws", `{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupEntryConfig"}`),
			BackupBucketProviderStatus: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupBucketStatus"}`)},
			Region:                     "eu-west-1",
			BucketName:                 "8c3e6e5b-5f1a-4c3e-9d43-2c5b0f0e6a11",
			SecretRef:                  corev1.SecretReference{Name: "entry-secret", Namespace: "garden"},
		},
		Status: gardenextensionsv1alpha1.BackupEntryStatus{
			DefaultStatus: gardenerStatus(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BackupEntryStatus"}`, `{"prefix":"p"}`),
		},
	}
}

func gardenerDNSRecord() *gardenextensionsv1alpha1.DNSRecord {
	return &gardenextensionsv1alpha1.DNSRecord{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "DNSRecord"},
		ObjectMeta: metav1.ObjectMeta{Name: "foobar-external", Namespace: "shoot--foobar--aws"},
		Spec: gardenextensionsv1alpha1.DNSRecordSpec{
			DefaultSpec: gardenerSpec("aws-route53", `{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"DNSRecordConfig"}`),
			SecretRef:   corev1.SecretReference{Name: "dnsrecord-foobar-external", Namespace: "shoot--foobar--aws"},
			Region:      ptr("eu-west-1"),
			Zone:        ptr("Z0123456789ABCDEFGHIJ"),
			Name:        "api.foobar.example.com",
			RecordType:  gardenextensionsv1alpha1.DNSRecordTypeA,
			Values:      []string{"52.1.2.3"},
			TTL:         ptr(int64(120)),
		},
		Status: gardenextensionsv1alpha1.DNSRecordStatus{
			DefaultStatus: gardenerStatus(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"DNSRecordStatus"}`, `{"zone":"z"}`),
			Zone:          ptr("Z0123456789ABCDEFGHIJ"),
		},
	}
}

func gardenerBastion() *gardenextensionsv1alpha1.Bastion {
	return &gardenextensionsv1alpha1.Bastion{
		TypeMeta:   metav1.TypeMeta{APIVersion: "extensions.gardener.cloud/v1alpha1", Kind: "Bastion"},
		ObjectMeta: metav1.ObjectMeta{Name: "cli-abcd1234", Namespace: "shoot--foobar--aws"},
		Spec: gardenextensionsv1alpha1.BastionSpec{
			DefaultSpec: gardenerSpec("aws", `{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BastionConfig"}`),
			UserData:    []byte("#!/bin/bash\necho ssh-ed25519 AAAA >> /home/gardener/.ssh/authorized_keys\n"),
			Ingress: []gardenextensionsv1alpha1.BastionIngressPolicy{{
				IPBlock: networkingv1.IPBlock{CIDR: "203.0.113.0/24", Except: []string{"203.0.113.7/32"}},
			}},
		},
		Status: gardenextensionsv1alpha1.BastionStatus{
			DefaultStatus: gardenerStatus(`{"apiVersion":"aws.provider.extensions.gardener.cloud/v1alpha1","kind":"BastionStatus"}`, `{"instance":"i-0815"}`),
			Ingress: &corev1.LoadBalancerIngress{
				IP: "52.1.2.4", Hostname: "ec2-52-1-2-4.eu-west-1.compute.amazonaws.com", IPMode: ptr(corev1.LoadBalancerIPModeVIP),
				Ports: []corev1.PortStatus{{Port: 22, Protocol: corev1.ProtocolTCP, Error: ptr("none")}},
			},
		},
	}
}

func TestBackupBucketIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerBackupBucket()
	g.Expect(unsetFields(reflect.ValueOf(theirs).Elem(), "BackupBucket")).To(BeEmpty(), "the fixture must set every field Gardener has")
	roundTrip(g, theirs, &extensionsv1alpha1.BackupBucket{}, &gardenextensionsv1alpha1.BackupBucket{})
}

func TestBackupEntryIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerBackupEntry()
	g.Expect(unsetFields(reflect.ValueOf(theirs).Elem(), "BackupEntry")).To(BeEmpty(), "the fixture must set every field Gardener has")
	roundTrip(g, theirs, &extensionsv1alpha1.BackupEntry{}, &gardenextensionsv1alpha1.BackupEntry{})
}

func TestDNSRecordIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerDNSRecord()
	g.Expect(unsetFields(reflect.ValueOf(theirs).Elem(), "DNSRecord")).To(BeEmpty(), "the fixture must set every field Gardener has")
	roundTrip(g, theirs, &extensionsv1alpha1.DNSRecord{}, &gardenextensionsv1alpha1.DNSRecord{})
}

func TestBastionIsWireCompatible(t *testing.T) {
	g := NewWithT(t)
	theirs := gardenerBastion()
	g.Expect(unsetFields(reflect.ValueOf(theirs).Elem(), "Bastion")).To(BeEmpty(), "the fixture must set every field Gardener has")
	roundTrip(g, theirs, &extensionsv1alpha1.Bastion{}, &gardenextensionsv1alpha1.Bastion{})
}
