// Package run is the contract between the controller and a terraform run: the run's identity and
// objects' names, its command and result, its errors and termination message, and the report of its
// progress and plan with its two transports.
package run
