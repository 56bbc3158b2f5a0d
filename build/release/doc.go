// Package release installs official HashiCorp release archives with hc-install, which checks the
// signature of a release's SHA256SUMS and the archive against it, after a bounded probe tells an
// unreachable site from a bad release.
package release
