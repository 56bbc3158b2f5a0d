// Package operator does for tests what an operator of a seed does by hand.
package operator
