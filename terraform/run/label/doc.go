// Package label makes a name a label value, which holds 63 characters where a name may hold 253.
package label
