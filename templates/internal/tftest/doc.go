// Package tftest runs the pinned terraform binary on rendered configurations in tests.
package tftest
