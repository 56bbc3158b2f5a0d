// Package mutations is a provider's mutations.yaml: loaded and checked with the provider, so
// that a broken one fails before it serves, and rendered per admission for the webhook.
package mutations
