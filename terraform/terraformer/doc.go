// Package terraformer runs one terraform command in a working directory, the whole of a run pod's work, saving the state as terraform writes it so that no kill loses it.
package terraformer
