package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SelfHostedShootExposure asks a provider for what makes a self-hosted shoot's API server
// reachable at a stable address: a load balancer in front of its control-plane nodes
// (Gardener v1.138 and later).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=selfhostedshootexposures,shortName=exp,singular=selfhostedshootexposure
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The type of the self hosted shoot exposure provider for this resource."
// +kubebuilder:printcolumn:name=IP,JSONPath=".status.ingress[0].ip",type=string,description="The IP of the first LoadBalancer ingress."
// +kubebuilder:printcolumn:name=Hostname,JSONPath=".status.ingress[0].hostname",type=string,description="The Hostname of the first LoadBalancer ingress."
// +kubebuilder:printcolumn:name=Status,JSONPath=".status.lastOperation.state",type=string,description="Status of self hosted shoot exposure resource."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="creation timestamp"
type SelfHostedShootExposure struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SelfHostedShootExposureSpec `json:"spec"`
	// +optional
	Status SelfHostedShootExposureStatus `json:"status"`
}

// SelfHostedShootExposureList is a list of SelfHostedShootExposures.
// +kubebuilder:object:root=true
type SelfHostedShootExposureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []SelfHostedShootExposure `json:"items"`
}

// SelfHostedShootExposureSpec is the desired exposure.
type SelfHostedShootExposureSpec struct {
	DefaultSpec `json:",inline"`
	// CredentialsRef names the Secret of the cloud credentials; gardenlet sets it for a
	// shoot with managed infrastructure only.
	// +optional
	CredentialsRef *corev1.ObjectReference `json:"credentialsRef,omitempty"`
	// Port is where the API server listens on the control-plane nodes, and where the
	// load balancer listens.
	Port int32 `json:"port"`
	// Endpoints are the healthy control-plane nodes to expose.
	Endpoints []ControlPlaneEndpoint `json:"endpoints"`
}

// ControlPlaneEndpoint is one control-plane node to expose.
type ControlPlaneEndpoint struct {
	// NodeName is the node's name.
	NodeName string `json:"nodeName"`
	// Addresses are the node's addresses.
	Addresses []corev1.NodeAddress `json:"addresses"`
}

// SelfHostedShootExposureStatus is what the provider reports back.
type SelfHostedShootExposureStatus struct {
	DefaultStatus `json:",inline"`
	// Ingress are the load balancer's addresses.
	// +optional
	Ingress []corev1.LoadBalancerIngress `json:"ingress,omitempty"`
}
