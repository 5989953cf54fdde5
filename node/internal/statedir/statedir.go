// Package statedir is the node's state directory: its default (for the node and for
// the command-line client, which reads the admin token there, without the client
// importing the server), its lock, and the token files minted in it.
package statedir

import "os"

// Default is the state directory when none is configured: /var/lib/scafo as root,
// else ./scafo-state.
func Default() string {
	if os.Geteuid() == 0 {
		return "/var/lib/scafo"
	}
	return "./scafo-state"
}
