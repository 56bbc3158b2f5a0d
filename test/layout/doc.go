// Package layout checks the repository's shape: the design card's top level and the bound on what each package exports.
package layout
