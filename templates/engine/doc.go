// Package engine is what a provider's templates and its mutations' templates share: their
// functions and the Cluster as they read it, apart so that the mutations model beside the
// webhook renders as the provider does without importing it.
package engine
