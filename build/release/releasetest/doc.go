// Package releasetest serves releases laid out as HashiCorp's releases site lays them out, signed
// by a test key, and a host that never answers, for the tests of what downloads them.
package releasetest
