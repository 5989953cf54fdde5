package client

import (
	"errors"
	"fmt"
)

// The exit statuses of every verb that talks to a node, in one place (docs/api.md,
// "CLI"; each verb's --help says them). A script tells from the status alone whether
// its write is in:
const (
	// ExitOK: done (a write with --wait is live on every live ingress).
	ExitOK = 0
	// ExitUsage: a usage error (an unknown flag, a missing argument) or any other
	// failure before the node was asked; nothing was sent.
	ExitUsage = 1
	// ExitRefused: the node refused the request (a 4xx: invalid, forbidden, conflict,
	// not found, a move to a port that does not serve): nothing was written.
	ExitRefused = 2
	// ExitNotLive: the write is in (the node answered it), but it is not live within
	// --wait: an ingress is behind, no ingress polls the fleet, or an instance move could
	// not be rolled back. The message says "written, not live".
	ExitNotLive = 3
	// ExitUnreachable: the node could not be reached or failed (connection refused, a
	// timeout, a 5xx such as "store unavailable"): whether a write is in is not known;
	// read it back.
	ExitUnreachable = 4
	// ExitRolledBack: `instances move --wait` did not go live in time and the instance
	// was moved back to its old port (the message says "rolled back to port N").
	ExitRolledBack = 5
)

// ExitStatuses is the paragraph every verb's --help ends with.
const ExitStatuses = `Exit status: 0 done; 1 usage or other error (nothing sent); 2 refused by the node (4xx: nothing
written); 3 written, not live in the time waited (an ingress behind, or no ingress polls the fleet);
4 node unreachable or failing (connection, timeout, 5xx: read the state back); 5 instances move not
live in time and rolled back to its old port.`

// ExitError is an error with the exit status it ends the command with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// exitErr wraps err with code (nil stays nil).
func exitErr(code int, err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

func exitErrf(code int, format string, a ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, a...)}
}

// ExitCode is the status a command's error ends it with: the ExitError's code, 0 for
// nil, else ExitUsage.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitUsage
}
