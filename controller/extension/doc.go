// Package extension does Gardener's extension protocol once, for every kind: operations, status,
// finalizers, annotations and the heartbeat.
package extension
