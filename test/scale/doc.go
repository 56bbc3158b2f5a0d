// Package scale measures one controller serving a seed's worth of Infrastructures, and a
// seed of every kind.
package scale
