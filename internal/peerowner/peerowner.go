// Package peerowner tells who owns the socket at the other end of a TCP connection to
// this machine (loopback, or one of its own addresses), before anything secret is
// written on it.
//
// Why: the node's API listens on an unprivileged port (7400). Were it ever free (a node
// stopped, or started without its socket unit), any local process, a tenant's release
// among them, could listen there and receive the admin token the CLI sends to
// http://127.0.0.1:7400 (docs/security.md, "The node's port"), or to the node's own
// address. Both ends are on this machine, so the kernel says which user created the listening socket that
// accepted the connection: /proc/net/tcp and tcp6 list the accepted socket, by its
// four-tuple, with the uid of the socket it was accepted from. The CLI sends a token
// only when that uid is one it trusts (root, which is systemd holding scafo-node.socket,
// the node's user, or the CLI's own user).
//
// Linux only; elsewhere Owner returns ErrUnsupported and the caller decides.
package peerowner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/user"
	"strconv"
)

// ErrUnsupported is returned where the owner cannot be read (an OS other than Linux).
var ErrUnsupported = errors.New("peerowner: unsupported on this system")

// Refused is a listener of this machine owned by a user the caller does not trust.
type Refused struct {
	Addr string // the address dialed
	UID  int    // the listening socket's owner
}

func (e *Refused) Error() string {
	who := strconv.Itoa(e.UID)
	if u, err := user.LookupId(who); err == nil {
		who = fmt.Sprintf("%d (%s)", e.UID, u.Username)
	}
	return fmt.Sprintf("%s is listened on by a socket of uid %s, not the node's (root through scafo-node.socket, the user scafo, or yours): "+
		"no token was sent; another process holds the node's port (ss -tlnp 'sport = :%s' names it)", e.Addr, who, portOf(e.Addr))
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// Trusted is the default set of owners: root (systemd holds scafo-node.socket as
// root), the user named service (the node's, "scafo") when it exists, and this
// process's own user (a node started by hand).
func Trusted(service string, self int) func(uid int) bool {
	svc := -1
	if u, err := user.Lookup(service); err == nil {
		if id, err := strconv.Atoi(u.Uid); err == nil {
			svc = id
		}
	}
	return func(uid int) bool { return uid == 0 || uid == self || (svc >= 0 && uid == svc) }
}

// isLocal says whether ip is an address of this machine: a loopback address, or one of
// its interfaces' (the node's own node.address, a public IP: a process of this machine
// listening on a wildcard address answers there too). A connection to one ends at a
// socket of this network namespace, listed in /proc/net/tcp*.
func isLocal(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// DialContext dials like net.Dialer and, when the address it reached is one of this
// machine's (loopback, or an interface's: isLocal), checks the owner of the listening socket that accepted the connection with
// trust; an untrusted owner closes the connection and returns a *Refused. Where the
// owner cannot be read (ErrUnsupported) the connection is returned unchecked.
func DialContext(trust func(uid int) bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ra, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok || !isLocal(ra.IP) {
			return c, nil
		}
		uid, err := Owner(ctx, c)
		switch {
		case errors.Is(err, ErrUnsupported):
			return c, nil
		case err != nil:
			c.Close()
			return nil, fmt.Errorf("checking who listens on %s before sending a token: %w", addr, err)
		case !trust(uid):
			c.Close()
			return nil, &Refused{Addr: c.RemoteAddr().String(), UID: uid}
		}
		return c, nil
	}
}
