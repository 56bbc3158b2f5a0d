package extension

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// codeUnclassified is the code label of an error that carries no Gardener error code.
const codeUnclassified = "unclassified"

// errorCodes are the Gardener error codes an operation may report.
var errorCodes = []extensionsv1alpha1.ErrorCode{
	extensionsv1alpha1.ErrorInfraUnauthenticated,
	extensionsv1alpha1.ErrorInfraUnauthorized,
	extensionsv1alpha1.ErrorInfraQuotaExceeded,
	extensionsv1alpha1.ErrorInfraRateLimitsExceeded,
	extensionsv1alpha1.ErrorInfraDependencies,
	extensionsv1alpha1.ErrorRetryableInfraDependencies,
	extensionsv1alpha1.ErrorInfraResourcesDepleted,
	extensionsv1alpha1.ErrorCleanupClusterResources,
	extensionsv1alpha1.ErrorConfigurationProblem,
	extensionsv1alpha1.ErrorRetryableConfigurationProblem,
}

// operationErrors counts the failed operations that lastError reports, by kind and by
// Gardener error code: an error of several codes counts once under each. The labels are
// bounded (two kinds, ten codes and unclassified), whatever the size of the seed.
var operationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "terraseed_operation_errors_total",
	Help: "Failed operations recorded in lastError, by kind and Gardener error code (unclassified when the error has none); an error of several codes counts under each.",
}, []string{"kind", "code"})

func init() {
	metrics.Registry.MustRegister(operationErrors)
}

// initErrorMetrics makes every code of the kind a series from the start, so that a rate
// over them is defined before the first error, and a dashboard shows zero rather than nothing.
func initErrorMetrics(kind string) {
	operationErrors.WithLabelValues(kind, codeUnclassified)
	for _, code := range errorCodes {
		operationErrors.WithLabelValues(kind, string(code))
	}
}

// countError counts a failure recorded in lastError.
func countError(kind string, codes []extensionsv1alpha1.ErrorCode) {
	if len(codes) == 0 {
		operationErrors.WithLabelValues(kind, codeUnclassified).Inc()
		return
	}
	for _, code := range codes {
		operationErrors.WithLabelValues(kind, string(code)).Inc()
	}
}
