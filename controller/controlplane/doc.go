// Package controlplane deploys a provider's control-plane objects for ControlPlanes with
// server-side apply, and reports their health.
package controlplane
