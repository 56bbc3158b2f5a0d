// Package terraformer runs one terraform command in a working directory, in a run pod or in the controller's process, saving the state as terraform writes it so that no kill loses it.
package terraformer
