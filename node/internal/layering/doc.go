// Package layering holds no code: its test checks the import direction of the node's
// packages (cmd → node → httpapi → subsystems → store, render), with `go list -deps`.
package layering
