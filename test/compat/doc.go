// Package compat proves terraseed's API wire-compatible with Gardener's extensions API.
package compat
