//go:build !linux

package peerowner

import (
	"context"
	"net"
)

// Owner is ErrUnsupported off Linux.
func Owner(context.Context, net.Conn) (int, error) { return 0, ErrUnsupported }
