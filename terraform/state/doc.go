// Package state keeps a terraform run's objects in the API server (its files, variables and state,
// the credentials of the last run, the sensitive outputs), where a run in any pod finds them and no
// run can lose them.
package state
