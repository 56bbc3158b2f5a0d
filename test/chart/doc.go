// Package chart tests the Helm chart with the real helm binary: lint and template with
// several value sets, the rendered arguments against the controller's flags, an install
// of its CRDs, RBAC and Deployment on envtest, and its RBAC proven least-privilege by
// impersonating the controller's and the terraformer's ServiceAccounts.
package chart
