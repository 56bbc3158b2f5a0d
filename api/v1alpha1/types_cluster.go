package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Cluster mirrors a shoot's Shoot, Seed and CloudProfile into the seed; its name is the
// shoot namespace.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=clusters,singular=cluster
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="Creation timestamp."
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterSpec `json:"spec"`
}

// ClusterList is a list of Clusters.
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []Cluster `json:"items"`
}

// ClusterSpec holds the mirrored objects, raw.
type ClusterSpec struct {
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	CloudProfile runtime.RawExtension `json:"cloudProfile"`
	// Seed is the seed the shoot runs on; a self-hosted shoot, which gardenadm bootstraps,
	// has none (Gardener v1.147 and later).
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Seed *runtime.RawExtension `json:"seed,omitempty"`
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Shoot runtime.RawExtension `json:"shoot"`
}
