// Package docs follows docs/provider-authoring.md as a new user would: it writes the
// page's files, runs its shell blocks in order with the real binary and terraform, and
// checks the output the page shows.
package docs
