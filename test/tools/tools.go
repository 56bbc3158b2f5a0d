//go:build tools

// Package tools pins the versions of the binaries the tests and code generation need.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
