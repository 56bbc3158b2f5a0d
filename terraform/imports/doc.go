// Package imports finds a state's resources again: its index of import IDs, and the import blocks that bring them back.
package imports
