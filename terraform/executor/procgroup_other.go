//go:build !linux

package executor

// endLeftoverGroups finds no processes where there is no /proc to read them from.
func endLeftoverGroups(string) (int, error) { return 0, nil }
