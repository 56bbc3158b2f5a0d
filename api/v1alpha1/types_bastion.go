package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bastion asks a provider for a temporary machine that operators reach a shoot's nodes
// through by SSH.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=bastions,singular=bastion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=IP,JSONPath=".status.ingress.ip",type=string,description="The public address of the bastion."
// +kubebuilder:printcolumn:name=Hostname,JSONPath=".status.ingress.hostname",type=string,description="The public host name of the bastion."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="Creation timestamp."
type Bastion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BastionSpec `json:"spec"`
	// +optional
	Status BastionStatus `json:"status,omitempty"`
}

// BastionList is a list of Bastions.
// +kubebuilder:object:root=true
type BastionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Bastion `json:"items"`
}

// BastionSpec is the desired bastion.
type BastionSpec struct {
	DefaultSpec `json:",inline"`
	// UserData is the bastion machine's user data (cloud-init), which sets up its SSH keys.
	UserData []byte `json:"userData"`
	// Ingress are the address blocks SSH to the bastion is allowed from.
	Ingress []BastionIngressPolicy `json:"ingress"`
}

// BastionIngressPolicy is one address block SSH is allowed from.
type BastionIngressPolicy struct {
	IPBlock networkingv1.IPBlock `json:"ipBlock"`
}

// BastionStatus is what the provider reports back.
type BastionStatus struct {
	DefaultStatus `json:",inline"`
	// Ingress is the bastion's public address or host name.
	// +optional
	Ingress *corev1.LoadBalancerIngress `json:"ingress,omitempty"`
}
