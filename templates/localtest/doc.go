// Package localtest applies and destroys every local provider case against a real kube-apiserver.
package localtest
