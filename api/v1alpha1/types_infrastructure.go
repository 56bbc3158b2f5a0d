package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Infrastructure asks a provider to create the infrastructure a shoot cluster needs.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=infrastructures,shortName=infra,singular=infrastructure
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The provider type."
// +kubebuilder:printcolumn:name=Region,JSONPath=".spec.region",type=string,description="The region of the infrastructure."
// +kubebuilder:printcolumn:name=State,JSONPath=".status.lastOperation.state",type=string,description="The state of the last operation."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="Creation timestamp."
type Infrastructure struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec InfrastructureSpec `json:"spec"`
	// +optional
	Status InfrastructureStatus `json:"status"`
}

// InfrastructureList is a list of Infrastructures.
// +kubebuilder:object:root=true
type InfrastructureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Infrastructure `json:"items"`
}

// InfrastructureSpec is the desired infrastructure.
type InfrastructureSpec struct {
	DefaultSpec `json:",inline"`
	// Region is the provider region to create the infrastructure in.
	Region string `json:"region"`
	// SecretRef references the secret holding the provider credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
	// SSHPublicKey is the public key the worker nodes accept.
	// +optional
	SSHPublicKey []byte `json:"sshPublicKey,omitempty"`
}

// InfrastructureStatus is what the provider reports back.
type InfrastructureStatus struct {
	DefaultStatus `json:",inline"`
	// NodesCIDR is the CIDR of the node network, when the provider chose it.
	// +optional
	NodesCIDR *string `json:"nodesCIDR,omitempty"`
	// EgressCIDRs are the CIDRs traffic from the shoot leaves through.
	// +optional
	EgressCIDRs []string `json:"egressCIDRs,omitempty"`
	// Networking holds the networks the provider set up.
	// +optional
	Networking *InfrastructureStatusNetworking `json:"networking,omitempty"`
}

// InfrastructureStatusNetworking holds the networks of the infrastructure.
type InfrastructureStatusNetworking struct {
	// +optional
	Pods []string `json:"pods,omitempty"`
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// +optional
	Services []string `json:"services,omitempty"`
}
