// Package chart tests the Helm chart with the real helm binary: lint and template with
// several value sets, the rendered arguments against the controller's flags, an install
// of its CRDs, RBAC and Deployment on envtest, and its RBAC proven least-privilege by
// impersonating the controller's and the terraformer's ServiceAccounts. Its monitoring
// objects too: the dashboard's queries and the alerts' expressions parse as PromQL and
// name only metrics that the controller binary, running against envtest, serves; the
// alerts are evaluated over series as Prometheus's rule manager evaluates them.
package chart
