// Package v1alpha1 holds the extensions.gardener.cloud/v1alpha1 types terraseed serves,
// wire-compatible with Gardener's.
// +kubebuilder:object:generate=true
// +groupName=extensions.gardener.cloud
package v1alpha1
