// Package image checks the Dockerfile that builds the terraseed image: it parses it with
// buildkit's Dockerfile parser, enforces the image rules and builds the binaries the image
// builds, with the same commands, environment and flags.
package image
