//go:build !linux

package terraformer

// eraseFromEnviron does nothing where there is no /proc: run pods run on Linux.
func eraseFromEnviron(...string) error { return nil }
