// Package scheme builds the scheme terraseed's clients use: Kubernetes' built-in types and
// extensions.gardener.cloud/v1alpha1.
package scheme
