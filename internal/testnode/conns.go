package testnode

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ConnCount counts the connections a node's listener accepted and has not closed, in
// all and by source address: what the node's connection cap holds, seen from the
// socket below it (the tests read it through the node's public surface: no hook in
// node/httpapi).
type ConnCount struct {
	net.Listener
	mu       sync.Mutex
	open     int
	bySource map[string]int
}

func CountConns(ln net.Listener) *ConnCount {
	return &ConnCount{Listener: ln, bySource: map[string]int{}}
}

func (l *ConnCount) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	src, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	l.mu.Lock()
	l.open++
	l.bySource[src]++
	l.mu.Unlock()
	return &countedConn{Conn: c, l: l, src: src}, nil
}

// SyscallConn hands over the socket below (syscall.Conn), so that the node's stop
// drains it (listengate) as it drains the socket it is given in production: without it
// the stop only waits, and resets what is queued.
func (l *ConnCount) SyscallConn() (syscall.RawConn, error) {
	sc, ok := l.Listener.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("testnode: %T does not hand over its socket", l.Listener)
	}
	return sc.SyscallConn()
}

// Held is how many connections are open, and how many of them from src.
func (l *ConnCount) Held(src string) (open, fromSource int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.bySource[src]
}

type countedConn struct {
	net.Conn
	l    *ConnCount
	src  string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.bySource[c.src]--
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// ConnsHeld is how many connections hold a slot of n's connection cap (its listener
// counts them), and how many of the slots are general (not reserved: the cap and the
// reserve its start line logs); ok is false before n logged them.
func ConnsHeld(n *Node) (open, general int, ok bool) {
	open, _ = n.Conns.Held("")
	m := capLine.FindStringSubmatch(n.Logs.String())
	if m == nil {
		return open, 0, false
	}
	total, _ := strconv.Atoi(m[1])
	reserved, _ := strconv.Atoi(m[2])
	return open, total - reserved, true
}

// capLine is the connection cap in the node's start line.
var capLine = regexp.MustCompile(`maxConns=(\d+) reservedConns=(\d+)`)

// ConnsOf reads n's connection cap (ConnsHeld) as it changes.
func ConnsOf(n *Node) HeldConns { return HeldConns{n} }

// HeldConns is a node's connection cap, read as it changes.
type HeldConns struct{ n *Node }

// Open is how many connections hold a slot of the cap.
func (c HeldConns) Open() int {
	open, _, _ := ConnsHeld(c.n)
	return open
}

// RawRequest opens a connection to n and sends req as is.
func RawRequest(t testing.TB, n *Node, req string) net.Conn {
	t.Helper()
	return DialFrom(t, n, "127.0.0.1", req)
}

// ClosedWithin reports whether the node closes c within d (c's answers, if any, were
// read already).
func ClosedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: closed by the node; a timeout is an error
}

// Raw requests that hold a connection: a probe and an (authorized) write that each
// announce a body and never send it; a probe on a connection kept alive.
const (
	SlowHealthz      = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"
	SlowAdminPut     = "PUT /v1/apps/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + AdminToken + "\r\nContent-Length: 100\r\n\r\n"
	HealthzKeepAlive = "GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
)
