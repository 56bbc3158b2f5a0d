package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BackupBucket asks a provider for a bucket that holds the etcd backups of a seed's shoots.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=backupbuckets,shortName=bb,singular=backupbucket
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The provider type."
// +kubebuilder:printcolumn:name=Region,JSONPath=".spec.region",type=string,description="The region of the bucket."
// +kubebuilder:printcolumn:name=State,JSONPath=".status.lastOperation.state",type=string,description="The state of the last operation."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="Creation timestamp."
type BackupBucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackupBucketSpec `json:"spec"`
	// +optional
	Status BackupBucketStatus `json:"status"`
}

// BackupBucketList is a list of BackupBuckets.
// +kubebuilder:object:root=true
type BackupBucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []BackupBucket `json:"items"`
}

// BackupBucketSpec is the desired bucket.
type BackupBucketSpec struct {
	DefaultSpec `json:",inline"`
	// Region is the provider region to create the bucket in.
	Region string `json:"region"`
	// SecretRef references the secret holding the provider credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
}

// BackupBucketStatus is what the provider reports back.
type BackupBucketStatus struct {
	DefaultStatus `json:",inline"`
	// GeneratedSecretRef references the Secret the provider generated with what the
	// backup side needs to reach the bucket.
	// +optional
	GeneratedSecretRef *corev1.SecretReference `json:"generatedSecretRef,omitempty"`
}

// BackupEntry asks a provider for the place in a bucket that holds one shoot's backups.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=backupentries,shortName=be,singular=backupentry
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The provider type."
// +kubebuilder:printcolumn:name=Region,JSONPath=".spec.region",type=string,description="The region of the bucket."
// +kubebuilder:printcolumn:name=Bucket,JSONPath=".spec.bucketName",type=string,description="The bucket the entry is in."
// +kubebuilder:printcolumn:name=State,JSONPath=".status.lastOperation.state",type=string,description="The state of the last operation."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="Creation timestamp."
type BackupEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BackupEntrySpec `json:"spec"`
	// +optional
	Status BackupEntryStatus `json:"status"`
}

// BackupEntryList is a list of BackupEntries.
// +kubebuilder:object:root=true
type BackupEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []BackupEntry `json:"items"`
}

// BackupEntrySpec is the desired entry.
type BackupEntrySpec struct {
	DefaultSpec `json:",inline"`
	// BackupBucketProviderStatus is the providerStatus of the entry's BackupBucket.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	BackupBucketProviderStatus *runtime.RawExtension `json:"backupBucketProviderStatus,omitempty"`
	// Region is the provider region of the bucket.
	Region string `json:"region"`
	// BucketName is the name of the bucket the entry is in.
	BucketName string `json:"bucketName"`
	// SecretRef references the secret holding the provider credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
}

// BackupEntryStatus is what the provider reports back.
type BackupEntryStatus struct {
	DefaultStatus `json:",inline"`
}
