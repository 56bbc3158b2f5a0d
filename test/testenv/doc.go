// Package testenv starts a real kube-apiserver and etcd with terraseed's CRDs for tests.
package testenv
