package v1alpha1

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DefaultSpec holds the fields every extension resource's spec shares.
type DefaultSpec struct {
	// Type names the provider that reconciles this resource, e.g. "aws" or "local".
	// +kubebuilder:validation:MinLength=1
	Type string `json:"type"`
	// Class tells which extension class (garden, seed, shoot) is responsible.
	// +optional
	Class *ExtensionClass `json:"class,omitempty"`
	// ProviderConfig is the provider-specific configuration, passed through by Gardener unread.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	ProviderConfig *runtime.RawExtension `json:"providerConfig,omitempty"`
}

// ExtensionClass is the class of an extension resource.
type ExtensionClass string

const (
	ExtensionClassGarden ExtensionClass = "garden"
	ExtensionClassSeed   ExtensionClass = "seed"
	ExtensionClassShoot  ExtensionClass = "shoot"
)

// DefaultStatus holds the fields every extension resource's status shares.
type DefaultStatus struct {
	// ProviderStatus is the provider-specific output, forwarded by Gardener to later steps.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	ProviderStatus *runtime.RawExtension `json:"providerStatus,omitempty"`
	// Conditions describe the current state of the resource.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// LastError is the error of the last operation, if it failed.
	// +optional
	LastError *LastError `json:"lastError,omitempty"`
	// LastOperation is the last operation performed on the resource.
	// +optional
	LastOperation *LastOperation `json:"lastOperation,omitempty"`
	// ObservedGeneration is the generation the last successful operation was based on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// State is the resource's state, kept for control-plane migration.
	// +kubebuilder:validation:XPreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	State *runtime.RawExtension `json:"state,omitempty"`
	// Resources are named references to resources that hold state.
	// +optional
	Resources []NamedResourceReference `json:"resources,omitempty"`
}

// NamedResourceReference is a named reference to a resource.
type NamedResourceReference struct {
	Name        string                                    `json:"name"`
	ResourceRef autoscalingv1.CrossVersionObjectReference `json:"resourceRef"`
}

// ConditionType is the type of a condition.
type ConditionType string

// ConditionStatus is the status of a condition: True, False, Unknown, Progressing.
type ConditionStatus string

const (
	ConditionTrue        ConditionStatus = "True"
	ConditionFalse       ConditionStatus = "False"
	ConditionUnknown     ConditionStatus = "Unknown"
	ConditionProgressing ConditionStatus = "Progressing"
)

// Condition is Gardener's condition shape: it carries error codes and an update time.
type Condition struct {
	Type               ConditionType   `json:"type"`
	Status             ConditionStatus `json:"status"`
	LastTransitionTime metav1.Time     `json:"lastTransitionTime"`
	LastUpdateTime     metav1.Time     `json:"lastUpdateTime"`
	Reason             string          `json:"reason"`
	Message            string          `json:"message"`
	// +optional
	Codes []ErrorCode `json:"codes,omitempty"`
}

// ErrorCode classifies an error so that Gardener can decide whether and when to retry.
type ErrorCode string

const (
	ErrorInfraUnauthenticated          ErrorCode = "ERR_INFRA_UNAUTHENTICATED"
	ErrorInfraUnauthorized             ErrorCode = "ERR_INFRA_UNAUTHORIZED"
	ErrorInfraQuotaExceeded            ErrorCode = "ERR_INFRA_QUOTA_EXCEEDED"
	ErrorInfraRateLimitsExceeded       ErrorCode = "ERR_INFRA_RATE_LIMITS_EXCEEDED"
	ErrorInfraDependencies             ErrorCode = "ERR_INFRA_DEPENDENCIES"
	ErrorRetryableInfraDependencies    ErrorCode = "ERR_RETRYABLE_INFRA_DEPENDENCIES"
	ErrorInfraResourcesDepleted        ErrorCode = "ERR_INFRA_RESOURCES_DEPLETED"
	ErrorCleanupClusterResources       ErrorCode = "ERR_CLEANUP_CLUSTER_RESOURCES"
	ErrorConfigurationProblem          ErrorCode = "ERR_CONFIGURATION_PROBLEM"
	ErrorRetryableConfigurationProblem ErrorCode = "ERR_RETRYABLE_CONFIGURATION_PROBLEM"
)

// LastError describes the error of the last operation.
type LastError struct {
	Description string `json:"description"`
	// +optional
	TaskID *string `json:"taskID,omitempty"`
	// +optional
	Codes []ErrorCode `json:"codes,omitempty"`
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// LastOperationType is the kind of an operation.
type LastOperationType string

const (
	LastOperationTypeCreate    LastOperationType = "Create"
	LastOperationTypeReconcile LastOperationType = "Reconcile"
	LastOperationTypeDelete    LastOperationType = "Delete"
	LastOperationTypeMigrate   LastOperationType = "Migrate"
	LastOperationTypeRestore   LastOperationType = "Restore"
)

// LastOperationState is the state of an operation.
type LastOperationState string

const (
	LastOperationStateProcessing LastOperationState = "Processing"
	LastOperationStateSucceeded  LastOperationState = "Succeeded"
	LastOperationStateError      LastOperationState = "Error"
	LastOperationStateFailed     LastOperationState = "Failed"
	LastOperationStatePending    LastOperationState = "Pending"
	LastOperationStateAborted    LastOperationState = "Aborted"
)

// LastOperation describes the last operation performed on a resource.
type LastOperation struct {
	Description    string             `json:"description"`
	LastUpdateTime metav1.Time        `json:"lastUpdateTime"`
	Progress       int32              `json:"progress"`
	State          LastOperationState `json:"state"`
	Type           LastOperationType  `json:"type"`
}
