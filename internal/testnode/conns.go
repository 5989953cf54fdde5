package testnode

import (
	"net"
	"sync"
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
