//go:build !linux

package listengate

import (
	"context"
	"net"
)

// Gate is Linux only.
func Gate(ln net.Listener) error { return ErrUnsupported }

// Queued is Linux only.
func Queued(ln net.Listener) (int, error) { return 0, ErrUnsupported }

// Drain is Linux only.
func Drain(ctx context.Context, ln net.Listener) error { return ErrUnsupported }
