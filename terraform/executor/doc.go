// Package executor starts terraform runs where they can run, in a pod or on this machine, schedules
// and measures them (Pipeline), and reads back how they ended, so that the controller never depends
// on where.
package executor
