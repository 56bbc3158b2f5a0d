package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of Gardener's extension resources.
	GroupVersion = schema.GroupVersion{Group: "extensions.gardener.cloud", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Infrastructure{}, &InfrastructureList{}, &ControlPlane{}, &ControlPlaneList{}, &Cluster{}, &ClusterList{},
		&BackupBucket{}, &BackupBucketList{}, &BackupEntry{}, &BackupEntryList{},
		&DNSRecord{}, &DNSRecordList{}, &Bastion{}, &BastionList{},
		&SelfHostedShootExposure{}, &SelfHostedShootExposureList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
