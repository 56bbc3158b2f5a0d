package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ControlPlane asks a provider to deploy the provider-specific parts of a shoot's control
// plane (a cloud-controller-manager, CSI controllers, their configuration) into the
// shoot's namespace in the seed.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=controlplanes,shortName=cp,singular=controlplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The provider type."
// +kubebuilder:printcolumn:name=Purpose,JSONPath=".spec.purpose",type=string,description="The purpose of the control plane."
// +kubebuilder:printcolumn:name=State,JSONPath=".status.lastOperation.state",type=string,description="The state of the last operation."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="Creation timestamp."
type ControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ControlPlaneSpec `json:"spec"`
	// +optional
	Status ControlPlaneStatus `json:"status"`
}

// ControlPlaneList is a list of ControlPlanes.
// +kubebuilder:object:root=true
type ControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ControlPlane `json:"items"`
}

// ControlPlaneSpec is the desired control plane.
type ControlPlaneSpec struct {
	DefaultSpec `json:",inline"`
	// Purpose is what Gardener set before v1.123, which removed it: a shoot's control plane
	// has none, or "normal". A ControlPlane of another purpose ("exposure") fails naming
	// the field.
	// +optional
	Purpose *Purpose `json:"purpose,omitempty"`
	// InfrastructureProviderStatus is the providerStatus of the shoot's Infrastructure.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	InfrastructureProviderStatus *runtime.RawExtension `json:"infrastructureProviderStatus,omitempty"`
	// Region is the provider region of the shoot.
	Region string `json:"region"`
	// SecretRef references the secret holding the provider credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
}

// Purpose is the purpose of a control plane.
type Purpose string

const (
	PurposeNormal   Purpose = "normal"
	PurposeExposure Purpose = "exposure"
)

// ControlPlaneStatus is what the provider reports back.
type ControlPlaneStatus struct {
	DefaultStatus `json:",inline"`
}
