// Package serving is how the controller's endpoints are served: the TLS settings of the
// webhook and metrics servers and who may read the metrics.
package serving

import (
	"crypto/tls"

	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// HardenTLS turns HTTP/2 off (the rapid-reset class of attacks; HTTP/1.1 serves the API
// server's webhook calls and Prometheus' scrapes) and requires TLS 1.2 at least; Go
// prefers TLS 1.3 whenever the client offers it.
func HardenTLS(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = tls.VersionTLS12
}

// MetricsOptions serves the metrics on address. Secure, they are served over HTTPS (a
// self-signed certificate) to callers the API server authenticates (TokenReview) and
// authorizes for GET on the non-resource URL /metrics (SubjectAccessReview).
func MetricsOptions(address string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: address}
	}
	return metricsserver.Options{
		BindAddress:    address,
		SecureServing:  true,
		FilterProvider: MetricsAuth,
		TLSOpts:        []func(*tls.Config){HardenTLS},
	}
}
