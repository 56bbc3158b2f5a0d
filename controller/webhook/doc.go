// Package mutation is the mutating admission webhook that adapts Gardener's control-plane
// Deployments to a provider, from the provider's mutations.yaml (package mutations, which
// the provider loads).
package webhook
