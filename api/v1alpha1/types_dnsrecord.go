package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DNSRecord asks a provider for one DNS record, such as the domain of a shoot's API server.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=dnsrecords,shortName=dns,singular=dnsrecord
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name=Type,JSONPath=".spec.type",type=string,description="The provider type."
// +kubebuilder:printcolumn:name="Domain Name",JSONPath=".spec.name",type=string,description="The domain name of the record."
// +kubebuilder:printcolumn:name="Record Type",JSONPath=".spec.recordType",type=string,description="The record type (A, AAAA, CNAME or TXT)."
// +kubebuilder:printcolumn:name=State,JSONPath=".status.lastOperation.state",type=string,description="The state of the last operation."
// +kubebuilder:printcolumn:name=Age,JSONPath=".metadata.creationTimestamp",type=date,description="Creation timestamp."
type DNSRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DNSRecordSpec `json:"spec"`
	// +optional
	Status DNSRecordStatus `json:"status"`
}

// DNSRecordList is a list of DNSRecords.
// +kubebuilder:object:root=true
type DNSRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []DNSRecord `json:"items"`
}

// DNSRecordSpec is the desired record.
type DNSRecordSpec struct {
	DefaultSpec `json:",inline"`
	// SecretRef references the secret holding the DNS provider's credentials.
	SecretRef corev1.SecretReference `json:"secretRef"`
	// Region is the region of the DNS provider's API, where it has regions.
	// +optional
	Region *string `json:"region,omitempty"`
	// Zone is the hosted zone of the record; none: the provider finds it from Name.
	// +optional
	Zone *string `json:"zone,omitempty"`
	// Name is the record's fully qualified domain name.
	Name string `json:"name"`
	// RecordType is A, AAAA, CNAME or TXT.
	RecordType DNSRecordType `json:"recordType"`
	// Values are the record's values (addresses, a domain name, texts).
	Values []string `json:"values"`
	// TTL is the record's time to live in seconds.
	// +optional
	TTL *int64 `json:"ttl,omitempty"`
}

// DNSRecordStatus is what the provider reports back.
type DNSRecordStatus struct {
	DefaultStatus `json:",inline"`
	// Zone is the hosted zone the provider found for the record, kept for later operations.
	// +optional
	Zone *string `json:"zone,omitempty"`
}

// DNSRecordType is the type of a DNS record.
type DNSRecordType string

const (
	DNSRecordTypeA     DNSRecordType = "A"
	DNSRecordTypeAAAA  DNSRecordType = "AAAA"
	DNSRecordTypeCNAME DNSRecordType = "CNAME"
	DNSRecordTypeTXT   DNSRecordType = "TXT"
)
