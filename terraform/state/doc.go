// Package state keeps a terraform run's files and state in the API server, where a run in any pod finds them and no run can lose them.
package state
