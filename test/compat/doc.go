// Package compat proves terraseed compatible with Gardener: its API is wire-compatible with
// Gardener's extensions API, and gardenlet's own code (the Infrastructure and ControlPlane
// components, their health checks and the ShootState computation, at the Gardener version
// go.mod requires) drives the controller through create, change, migrate, restore and delete,
// and its wait, given a short timeout, names how far an apply past its run timeout got.
//
// The gardenlet tests run the controller as a process against a kube-apiserver and etcd
// (envtest), with terraform and the kubectl provider; `make test` builds and points to them.
package compat
