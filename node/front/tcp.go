package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The TCP half of the front (443/tcp). Per connection:
//
//  1. read the ClientHello (clienthello.go: bounded in bytes and time; a slow or
//     oversized one is closed);
//  2. name := ServerName(hello); route := table().Lookup(name): ASCII case folds,
//     nothing else does;
//  3. a hit dials the route's upstreams in document order: the next one at once when a
//     dial is refused, after DialTimeout when it stays silent. The first that answers
//     gets a PROXY v2 header if the route asks for one, then the bytes read, byte for
//     byte, then both directions are copied (io.Copy between the two *net.TCPConn, which
//     Linux splices). When none answers the client is closed: a passthrough name never
//     goes to the fallback, whose TLS would answer with a certificate of its own;
//  4. anything else (no server name, a name no route has, an odd spelling, a
//     ClientHello crypto/tls refuses, bytes that are not a ClientHello at all) goes to
//     Fallback (Traefik's TLS entry point on an internal address) with a PROXY v2 header
//     carrying the client's address, then the bytes read, then the copy.

// TCPConfig sets the TCP proxy.
type TCPConfig struct {
	// Fallback is the address every connection that no passthrough route takes is
	// relayed to, always behind a PROXY v2 header (Traefik's TLS entry point on an
	// internal address, with proxyProtocol.trustedIPs naming the front). Empty: such
	// connections are closed.
	Fallback string
	// HelloTimeout bounds the time a client has to send its whole ClientHello (default
	// 3 s).
	HelloTimeout time.Duration
	// MaxHello bounds the bytes of TLS records a ClientHello may take, headers included
	// (default 16 KiB; clienthello.go says why).
	MaxHello int
	// DialTimeout is how long a silent upstream is waited for before the next one is
	// dialed (default 1 s). A refusal moves on at once. The fallback gets the same
	// budget.
	DialTimeout time.Duration
	// Refuse are further addresses no passthrough route may send a client to (the node
	// APIs the front follows, the QUIC fallback), beside the fallback and the proxy's
	// own listening sockets, which it refuses by itself (guard.go).
	Refuse []string
}

const (
	defaultHelloTimeout = 3 * time.Second
	defaultMaxHello     = 16 << 10
	defaultDialTimeout  = time.Second
)

// Bounds of the settings: a ClientHello needs room (a post-quantum one is ~1.8 KB), and
// crypto/tls itself refuses a handshake message over 64 KiB.
const (
	minMaxHello = 4 << 10
	maxMaxHello = 64 << 10
)

// Validate lists what is wrong with c, naming each field (nil when valid; a zero field
// takes its default). It reports and changes nothing.
func (c TCPConfig) Validate() []error {
	var errs []error
	if c.HelloTimeout < 0 {
		errs = append(errs, fmt.Errorf("helloTimeout %s: must not be negative (0: %s)", c.HelloTimeout, defaultHelloTimeout))
	}
	if c.MaxHello != 0 && (c.MaxHello < minMaxHello || c.MaxHello > maxMaxHello) {
		errs = append(errs, fmt.Errorf("maxHello %d: must be %d..%d bytes (0: %d)", c.MaxHello, minMaxHello, maxMaxHello, defaultMaxHello))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("dialTimeout %s: must not be negative (0: %s)", c.DialTimeout, defaultDialTimeout))
	}
	if c.Fallback != "" {
		if _, _, err := net.SplitHostPort(c.Fallback); err != nil {
			errs = append(errs, fmt.Errorf("fallback %q: not a host:port: %v", c.Fallback, err))
		}
	}
	return errs
}

func (c TCPConfig) withDefaults() TCPConfig {
	if c.HelloTimeout <= 0 {
		c.HelloTimeout = defaultHelloTimeout
	}
	if c.MaxHello <= 0 {
		c.MaxHello = defaultMaxHello
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = defaultDialTimeout
	}
	return c
}

// TCPStats counts what the proxy did with the connections it accepted. Every accepted
// connection ends in exactly one of Routed, Fallback, HelloTimeout, HelloTooLarge,
// ClientClosed, NoUpstream, FallbackFailed, or is still Open.
type TCPStats struct {
	Accepted       uint64 // connections accepted
	Routed         uint64 // relayed to an upstream of a passthrough route
	Fallback       uint64 // relayed to the fallback: NotClientHello + NoServerName + Unrouted
	NotClientHello uint64 // of Fallback: bytes that are not a ClientHello
	NoServerName   uint64 // of Fallback: a ClientHello without one server name crypto/tls accepts
	Unrouted       uint64 // of Fallback: a server name no passthrough route has
	HelloTimeout   uint64 // closed: no whole ClientHello before HelloTimeout
	HelloTooLarge  uint64 // closed: a ClientHello over MaxHello
	ClientClosed   uint64 // closed: the client left (or failed) before its ClientHello was whole
	NoUpstream     uint64 // closed: every upstream of the route refused or stayed silent
	FallbackFailed uint64 // closed: the fallback did not answer (or none is set)
	DialFailures   uint64 // upstream dials that failed (a refused or silent upstream, before the next)
	Forbidden      uint64 // upstreams not dialed: the front itself, the fallback, a node API (guard.go)
	Open           int64  // connections being handled now
}

// TCPProxy is the front's TCP proxy. Its zero value is not usable: NewTCPProxy.
type TCPProxy struct {
	cfg    TCPConfig
	table  func() *Table
	log    *slog.Logger
	dialer net.Dialer // DialTimeout per address
	guard  atomic.Pointer[upstreamGuard]

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // client and upstream sides of open connections
	closing   bool
	stopped   chan struct{} // closed when closing becomes true
	// wg counts the running Serve calls and connection handlers. A Serve holds its
	// count while it adds its handlers', so no Add happens at zero during a Wait.
	wg sync.WaitGroup

	ctx    context.Context // ends when the proxy closes every connection
	cancel context.CancelFunc

	stats struct {
		accepted, routed, fallback, notClientHello, noServerName, unrouted, helloTimeout, helloTooLarge,
		clientClosed, noUpstream, fallbackFailed, dialFailures, forbidden atomic.Uint64
		open atomic.Int64
	}
}

// NewTCPProxy returns a proxy with cfg (zero fields take their defaults) that routes by
// the table table returns at each connection (so a new routing document applies to the
// next connection, never to an open one).
func NewTCPProxy(cfg TCPConfig, table func() *Table, log *slog.Logger) *TCPProxy {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &TCPProxy{cfg: cfg.withDefaults(), table: table, log: log,
		listeners: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}, stopped: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.dialer.Timeout = p.cfg.DialTimeout
	p.guard.Store(newUpstreamGuard(p.guardEntriesLocked()))
	return p
}

// guardEntriesLocked lists what the guard refuses: the fallback, cfg.Refuse and the
// listening sockets (p.mu held, or p not shared yet).
func (p *TCPProxy) guardEntriesLocked() []guardEntry {
	var es []guardEntry
	if p.cfg.Fallback != "" {
		es = append(es, guardEntry{p.cfg.Fallback, "the fallback"})
	}
	for _, a := range p.cfg.Refuse {
		es = append(es, guardEntry{a, "an address of the front's own (a node API, a fallback)"})
	}
	for ln := range p.listeners {
		es = append(es, guardEntry{ln.Addr().String(), "the front's own listening socket"})
	}
	return es
}

// Stats returns the counters.
func (p *TCPProxy) Stats() TCPStats {
	s := &p.stats
	return TCPStats{Accepted: s.accepted.Load(), Routed: s.routed.Load(), Fallback: s.fallback.Load(),
		NotClientHello: s.notClientHello.Load(), NoServerName: s.noServerName.Load(), Unrouted: s.unrouted.Load(),
		HelloTimeout: s.helloTimeout.Load(), HelloTooLarge: s.helloTooLarge.Load(), ClientClosed: s.clientClosed.Load(),
		NoUpstream: s.noUpstream.Load(), FallbackFailed: s.fallbackFailed.Load(), DialFailures: s.dialFailures.Load(),
		Forbidden: s.forbidden.Load(), Open: s.open.Load()}
}

// ErrTCPProxyClosed is what Serve returns for a proxy already closed or shut down.
var ErrTCPProxyClosed = errors.New("front: TCP proxy closed")

// Serve accepts connections on ln and handles each until Close or Shutdown, then
// returns nil; any other accept error (not a temporary one, which is retried after a
// pause) is returned. Serve closes ln when it returns. Several listeners may be served
// at once (one per address, or the sockets systemd hands over).
func (p *TCPProxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		_ = ln.Close()
		return ErrTCPProxyClosed
	}
	p.listeners[ln] = struct{}{}
	p.guard.Store(newUpstreamGuard(p.guardEntriesLocked()))
	p.wg.Add(1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
		_ = ln.Close()
		p.wg.Done()
	}()
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			p.mu.Lock()
			closing := p.closing
			p.mu.Unlock()
			if closing {
				return nil
			}
			if temporaryAccept(err) {
				// Out of file descriptors and the like: wait and accept again, as
				// net/http does, rather than stop serving.
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				p.log.Warn("front: accepting a TCP connection", "err", err, "retry_in", pause)
				select {
				case <-time.After(pause):
				case <-p.stopped:
					return nil
				}
				continue
			}
			return fmt.Errorf("front: accepting on %s: %w", ln.Addr(), err)
		}
		pause = 0
		p.stats.accepted.Add(1)
		if !p.track(c) {
			_ = c.Close()
			return nil
		}
		p.wg.Add(1)
		p.stats.open.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.stats.open.Add(-1)
			defer p.untrack(c)
			defer c.Close()
			p.handle(c)
		}()
	}
}

func temporaryAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ECONNABORTED)
}

// track records an open connection (so Close and an expired Shutdown can close it);
// false when the proxy is closing.
func (p *TCPProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing && p.ctx.Err() != nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *TCPProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Shutdown stops accepting (it closes every listener Serve holds; every Serve returns)
// and waits for the open connections to end by themselves; when ctx ends first, it
// closes them and returns ctx's error.
func (p *TCPProxy) Shutdown(ctx context.Context) error {
	p.stopAccepting()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		p.cancel()
		return nil
	case <-ctx.Done():
		p.closeAll()
		<-done
		return ctx.Err()
	}
}

// Close stops accepting and closes every open connection at once.
func (p *TCPProxy) Close() error {
	p.stopAccepting()
	p.closeAll()
	p.wg.Wait()
	return nil
}

func (p *TCPProxy) stopAccepting() {
	p.mu.Lock()
	if !p.closing {
		p.closing = true
		close(p.stopped)
	}
	for ln := range p.listeners {
		_ = ln.Close()
	}
	p.mu.Unlock()
}

func (p *TCPProxy) closeAll() {
	p.mu.Lock()
	p.cancel() // ends dials in flight; track refuses what Serve accepted meanwhile
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// handle serves one client connection to its end.
func (p *TCPProxy) handle(c net.Conn) {
	h, err := readClientHello(c, time.Now().Add(p.cfg.HelloTimeout), p.cfg.MaxHello)
	switch {
	case err == nil:
	case errors.Is(err, errNotClientHello):
		p.toFallback(c, h.raw, &p.stats.notClientHello)
		return
	case errors.Is(err, errHelloTimeout):
		p.stats.helloTimeout.Add(1)
		p.log.Debug("front: ClientHello too slow: closed", "client", c.RemoteAddr(), "bytes", len(h.raw))
		return
	case errors.Is(err, errHelloTooLarge):
		p.stats.helloTooLarge.Add(1)
		p.log.Debug("front: ClientHello too large: closed", "client", c.RemoteAddr(), "bytes", len(h.raw))
		return
	default:
		p.stats.clientClosed.Add(1)
		p.log.Debug("front: no ClientHello", "client", c.RemoteAddr(), "err", err)
		return
	}
	name, ok := ServerName(h.msg)
	if !ok {
		p.toFallback(c, h.raw, &p.stats.noServerName)
		return
	}
	route, ok := p.table().Lookup(name)
	if !ok {
		p.toFallback(c, h.raw, &p.stats.unrouted)
		return
	}
	up := p.dialRoute(route)
	if up == nil {
		p.stats.noUpstream.Add(1)
		p.log.Warn("front: no upstream of a passthrough route answered: client closed",
			"name", route.Name, "application", route.Application, "upstreams", len(route.Upstreams))
		return
	}
	defer p.untrack(up)
	defer up.Close()
	var first []byte
	if route.ProxyProtocol == 2 {
		first = appendProxyV2(make([]byte, 0, proxyV2MaxBytes+len(h.raw)), c.RemoteAddr(), c.LocalAddr())
	}
	first = append(first, h.raw...)
	if _, err := up.Write(first); err != nil {
		p.stats.noUpstream.Add(1)
		p.log.Warn("front: writing the ClientHello to an upstream", "name", route.Name, "upstream", up.RemoteAddr(), "err", err)
		return
	}
	p.stats.routed.Add(1)
	relay(c, up)
}

// dialRoute dials r's upstreams in order and returns the first that answers (tracked),
// or nil.
func (p *TCPProxy) dialRoute(r *Route) net.Conn {
	for _, addr := range r.Upstreams {
		if why := p.guard.Load().refuse(addr); why != "" {
			p.stats.forbidden.Add(1)
			p.log.Warn("front: a passthrough route names an address no route may reach: not dialed",
				"name", r.Name, "application", r.Application, "upstream", addr, "reason", why)
			continue
		}
		up, err := p.dialer.DialContext(p.ctx, "tcp", addr)
		if err == nil {
			if p.track(up) {
				return up
			}
			_ = up.Close()
			return nil
		}
		p.stats.dialFailures.Add(1)
		p.log.Debug("front: upstream did not answer, next", "name", r.Name, "upstream", addr, "err", err)
		if p.ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// toFallback relays c to the fallback behind a PROXY v2 header, raw first; why counts
// the reason once the fallback has the connection.
func (p *TCPProxy) toFallback(c net.Conn, raw []byte, why *atomic.Uint64) {
	if p.cfg.Fallback == "" {
		p.stats.fallbackFailed.Add(1)
		p.log.Debug("front: no fallback: closed", "client", c.RemoteAddr())
		return
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		p.stats.clientClosed.Add(1)
		return
	}
	fb, err := p.dialer.DialContext(p.ctx, "tcp", p.cfg.Fallback)
	if err != nil {
		p.stats.fallbackFailed.Add(1)
		p.log.Warn("front: the fallback did not answer: client closed", "fallback", p.cfg.Fallback, "err", err)
		return
	}
	if !p.track(fb) {
		_ = fb.Close()
		return
	}
	defer p.untrack(fb)
	defer fb.Close()
	first := appendProxyV2(make([]byte, 0, proxyV2MaxBytes+len(raw)), c.RemoteAddr(), c.LocalAddr())
	first = append(first, raw...)
	if _, err := fb.Write(first); err != nil {
		p.stats.fallbackFailed.Add(1)
		p.log.Warn("front: writing to the fallback", "fallback", p.cfg.Fallback, "err", err)
		return
	}
	why.Add(1)
	p.stats.fallback.Add(1)
	relay(c, fb)
}

// relay copies both ways until both directions end. A direction that ends with the
// reader's EOF half-closes the other side's write (CloseWrite: a FIN), so a protocol
// that half-closes keeps working; one that ends with an error closes both connections,
// which ends the other direction too. io.Copy between two *net.TCPConn uses splice(2)
// on Linux (TCPConn.ReadFrom): client and upstream are the bare connections, the
// peeked bytes having been read off the client exactly and written to the upstream
// already.
func relay(client, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyHalf(up, client)
	}()
	copyHalf(client, up)
	<-done
}

func copyHalf(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		_ = src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	_ = dst.Close()
}
