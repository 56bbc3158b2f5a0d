// Package scale measures one controller serving a seed's worth of Infrastructures.
package scale
