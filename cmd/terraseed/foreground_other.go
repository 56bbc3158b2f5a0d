//go:build !unix

package main

// takeTerminal does nothing where there are no process groups.
func takeTerminal() (giveBack func()) { return func() {} }
