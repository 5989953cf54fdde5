package fleetwrite

import (
	"errors"

	"github.com/scafo/ingress/node/store"
)

// The write domain's errors. The HTTP layer maps each kind to one status in one place
// (node.writeDomainError); nothing else decides a status.
var (
	// ErrNotFound: the object the operation names does not exist (404).
	ErrNotFound = store.ErrNotFound
	// ErrPrecondition: the caller's If-Match does not match the current object (412).
	ErrPrecondition = errors.New("precondition failed")
	// ErrForeign: the store does not look like the one this node served; nothing is
	// written (503).
	ErrForeign = store.ErrForeign
)

// ErrInvalid is bad input (400): Field names what is wrong.
type ErrInvalid struct {
	// What is the short error ("invalid host"); Field the offending field.
	What, Field string
	Err         error
}

func (e *ErrInvalid) Error() string { return e.Err.Error() }
func (e *ErrInvalid) Unwrap() error { return e.Err }

// ErrConflict is a refusal because of another object (409): Holder names it.
type ErrConflict struct {
	What, Holder, Detail string
}

func (e *ErrConflict) Error() string { return e.What + ": " + e.Detail }

// ErrForbidden is a credential that may not do this (403).
type ErrForbidden struct {
	What, Detail string
}

func (e *ErrForbidden) Error() string { return e.What + ": " + e.Detail }

func invalid(what, field string, err error) error {
	return &ErrInvalid{What: what, Field: field, Err: err}
}
