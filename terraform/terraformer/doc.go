// Package terraformer runs one terraform command in a working directory (Runner), in a run pod or
// in the controller's process, saving the state as terraform writes it so that no kill loses it;
// one file per command with its arguments, and the Settings every run gets.
package terraformer
