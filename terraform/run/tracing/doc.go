// Package tracing is the OpenTelemetry tracing of reconciles and runs: off unless an OTLP endpoint is set, and carried into run pods and terraform as W3C trace context.
package tracing
