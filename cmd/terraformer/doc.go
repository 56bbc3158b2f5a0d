// Command terraformer runs one terraform command for one Infrastructure, keeping its state in the
// API server.
package main
