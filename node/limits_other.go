//go:build !unix

package node

// openFileLimit is unknown here: the connection cap defaults to its upper bound.
func openFileLimit() int { return 0 }
