// Package run names a terraform run's objects, so that every part of terraseed and Gardener's terraformer agree on them.
package run
