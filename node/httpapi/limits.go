package httpapi

// Hostile clients (docs/design.md §5): what one client can hold is bounded.
//
//   - Time. Headers must arrive within limits.headerTimeout (http.Server), a request's
//     body within limits.bodyTimeout of its headers (a per-request read deadline, set
//     only when a body is announced, so a long-poll, a GET without a body, is not cut),
//     an answer must be taken within limits.writeTimeout (re-armed after a long-poll's
//     wait), and an idle keep-alive connection closes after limits.idleTimeout. A
//     handler that answers without reading an announced body leaves net/http to drain
//     it: that drain runs under the same body deadline. A refused request (a 401, the
//     reserve's 503) does not wait for its body: rejectDrain, then the connection
//     closes (cutBody).
//   - Connections. The listener admits at most limits.maxConns at once (by default 3/4
//     of the open-file limit left at start, so the process keeps files for its store and spill files).
//     The last limits.reservedConns of them are a reserve: a connection accepted while
//     the general part is full serves one request (it is answered "Connection: close")
//     and only if that request is an ingress poll or /v1/status with the ingress or
//     admin token, or a health probe (/v1/healthz, /v1/readyz, /v1/health/instances/…)
//     or an applied probe's callback (/v1/ingress/applied/…), without a body; anything else (the admin's writes included) is a 503 at once. A
//     connection past limits.maxConnsPerSource while the general part is not full
//     serves one request too, that and any request with the ingress or admin token
//     (sourceCapAdmits: the address may be 127.0.0.1, shared with tenants). Beyond
//     maxConns a new connection waits in the kernel's queue for acceptWait at most, then
//     gets a bare 503 and is closed.
//   - Log lines. Rejections are logged once per remote address per limits.rejectLog,
//     with the count of those not logged since (rejectlog.go).
//
// Why a reserve and not only "one cap and fast timeouts": refused clients are cut fast,
// but a client that does get served (a probe, a poll with a slow body, a valid token)
// holds its slot for a body timeout, so the general part can fill for seconds at a time;
// the reserve keeps Traefik's polls and health checks, which come with the ingress token
// or need none, answering while it does. The residual: a flood of connections that never
// finish their headers occupies reserve slots too, for headerTimeout each (a request
// cannot be told apart before its headers); per-source limits belong in front of the
// node.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ---- the listener ----

// connLimiter caps the connections of a listener (see the file comment). While the cap
// is reached, new connections wait in the kernel's accept queue, where they cost the
// process nothing, for at most acceptWait: reserved connections are released within
// one request, so a short wait lets a poll in behind a burst. A cap still reached after
// that is an attack holding it: from then on the connection at the head of the queue
// is answered 503 and closed at once, so clients are not kept waiting, until a slot
// frees.
type connLimiter struct {
	net.Listener
	slots    chan struct{} // one per open connection
	general  int
	onRefuse func(remote string)

	// perSource caps the general connections of one remote address; a connection
	// beyond it is marked reserved (one admissible request, then closed).
	perSource int
	mu        sync.Mutex
	bySource  map[string]int

	fullSince time.Time   // when the cap was last found reached (Accept's goroutine only)
	accepting atomic.Bool // a slot is taken for the connection Accept waits for
	closeOnce sync.Once
	closed    chan struct{}
}

// acceptWait is how long a connection waits for a slot before the cap counts as held.
const acceptWait = 500 * time.Millisecond

func newConnLimiter(ln net.Listener, total, reserved, perSource int, onRefuse func(string)) *connLimiter {
	return &connLimiter{Listener: ln, slots: make(chan struct{}, total), general: total - reserved,
		perSource: perSource, bySource: map[string]int{}, onRefuse: onRefuse, closed: make(chan struct{})}
}

// wrap makes c a connection of the limiter (its slot taken): reserved when the general
// part is full or its source holds perSource general connections already.
func (l *connLimiter) wrap(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l, accepted: time.Now(), reserved: len(l.slots) > l.general}
	if lc.reserved {
		return lc
	}
	src := sourceKey(hostOf(c.RemoteAddr().String()))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySource[src] >= l.perSource {
		lc.reserved, lc.sourceFull = true, true
		return lc
	}
	l.bySource[src]++
	lc.source = src
	return lc
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// sourceKey is the key a per-source limit counts host under: an IPv4 address itself,
// an IPv6 address its /64 (one subscriber, one LAN: whoever holds one address holds
// the 2^64 of its /64, so a limit per IPv6 address is none); anything else as it is.
func sourceKey(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if a = a.Unmap(); a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
}

// refusedAnswer is written, unasked, to a connection beyond the cap before it is closed;
// it carries the headers of every answer (noStore).
const refusedAnswer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 75\r\n\r\n" +
	`{"error":"overloaded","detail":"the node is at its connection limit; retry"}`

// Accept returns the next connection within the cap, marked reserved when the general
// part is full.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
			l.fullSince = time.Time{}
			l.accepting.Store(true) // the slot taken waits for the next connection
			c, err := l.Listener.Accept()
			l.accepting.Store(false)
			if err != nil {
				<-l.slots
				return nil, err
			}
			return l.wrap(c), nil
		default:
		}
		now := time.Now()
		if l.fullSince.IsZero() {
			l.fullSince = now
		}
		if wait := l.fullSince.Add(acceptWait).Sub(now); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case l.slots <- struct{}{}:
				t.Stop()
				<-l.slots // take it in the loop above
				continue
			case <-t.C:
			case <-l.closed:
				t.Stop()
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}: // freed while Accept waited
			l.fullSince = time.Time{}
			return l.wrap(c), nil
		default:
		}
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write([]byte(refusedAnswer))
		c.Close()
		if l.onRefuse != nil {
			l.onRefuse(c.RemoteAddr().String())
		}
	}
}

// open is the number of connections holding a slot.
func (l *connLimiter) open() int {
	n := len(l.slots)
	if l.accepting.Load() {
		n--
	}
	return n
}

func (l *connLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitedConn holds one slot of its limiter until closed.
type limitedConn struct {
	net.Conn
	l        *connLimiter
	reserved bool
	accepted time.Time
	source   string // counted in l.bySource ("" when not: a reserved connection)
	// sourceFull: reserved because its source held perSource connections already.
	sourceFull bool
	closed     atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		if c.source != "" {
			c.l.mu.Lock()
			if c.l.bySource[c.source]--; c.l.bySource[c.source] <= 0 {
				delete(c.l.bySource, c.source)
			}
			c.l.mu.Unlock()
		}
		<-c.l.slots
	}
	return c.Conn.Close()
}

type reservedConnKey struct{}

type connKey struct{}

// connContext marks the requests of a reserved connection, and carries the connection
// (its age) to every request (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	lc, ok := c.(*limitedConn)
	if !ok {
		return ctx
	}
	ctx = context.WithValue(ctx, connKey{}, lc)
	if lc.reserved {
		return context.WithValue(ctx, reservedConnKey{}, true)
	}
	return ctx
}

// connAge is how long ago r's connection was accepted (0 when unknown).
func connAge(r *http.Request) time.Duration {
	if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		return time.Since(lc.accepted)
	}
	return 0
}

func onReservedConn(r *http.Request) bool {
	v, _ := r.Context().Value(reservedConnKey{}).(bool)
	return v
}

// connGuard is the connection guard: the listener's cap (Listen), and on each request
// the reserve's rule (guard).
type connGuard struct {
	maxAge  time.Duration // limits.connMaxAge
	tokens  *nodeTokens
	refused *refusals
	// reserve is what of the reserve a path may use (the route table's attribute).
	reserve func(path string) reserveKind
	conns   atomic.Pointer[connLimiter] // the API listener's cap (set by listen)
}

// guard serves, on a reserved connection, only what the reserve is kept for, and
// closes the connection after it.
func (g *connGuard) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !onReservedConn(r) {
			// A connection past limits.connMaxAge ends with this answer, however busy
			// its client keeps it.
			if connAge(r) > g.maxAge {
				w.Header().Set("Connection", "close")
			}
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if g.reserveAdmits(r) || g.sourceCapAdmits(r) {
			next.ServeHTTP(w, r)
			return
		}
		cutBody(w, r)
		w.Header().Set("Retry-After", "1")
		why, reason := "the node is at its connection limit; the connections left are kept for ingress polls and health probes", RefusedConnReserve
		if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok && lc.sourceFull {
			why, reason = "this address holds limits.maxConnsPerSource connections already; a further one serves only ingress polls, status, health probes and requests with the ingress or admin token", RefusedConnPerSource
		}
		g.refused.count(reason)
		writeError(w, http.StatusServiceUnavailable, "overloaded", why)
	})
}

// reserveAdmits: ingress polls and /v1/status with the ingress (or admin) token, health
// probes and applied callbacks, none with a body (a body could hold the slot for a body timeout). Tokens are compared in constant time; no store is read.
func (g *connGuard) reserveAdmits(r *http.Request) bool {
	kind := g.reserve(r.URL.Path) // the routes' reserve attribute (routes.go)
	read := (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.ContentLength == 0
	if read && kind == reserveAnyone {
		return true
	}
	tok := bearer(r.Header.Get("Authorization"))
	if tok == "" {
		return false
	}
	// The admin token gets what the ingress token gets, no more: the reserve is for
	// ingress polls and health, not for whoever holds a strong token.
	return read && kind == reserveIngress && (g.tokens.isIngress(tok) || g.tokens.isAdmin(tok))
}

// sourceCapAdmits: on a connection past limits.maxConnsPerSource (the general part not
// full), any request with the ingress or admin token, body included. One address is
// not one client: on the node's machine 127.0.0.1 is the ingress beside the node, the
// operators' CLI and every tenant's release at once, and a tenant process holding the
// cap of idle connections made the local Caddy's /v1/storage (every certificate load,
// store and lock) and the operators' writes answer 503 (issue 39). The node's own
// tokens are compared in constant time and read no store; the connection still closes
// after its one request. A connection that is reserved because the general part is
// full gets the reserve's rule only (reserveAdmits). Guarded by
// TestTheNodesTokensPassTheCapOfAnAddressTheyShare.
func (g *connGuard) sourceCapAdmits(r *http.Request) bool {
	lc, ok := r.Context().Value(connKey{}).(*limitedConn)
	if !ok || !lc.sourceFull {
		return false
	}
	tok := bearer(r.Header.Get("Authorization"))
	return tok != "" && (g.tokens.isIngress(tok) || g.tokens.isAdmin(tok))
}

// ---- time ----

// deadlines are the request deadlines: limits.bodyTimeout and limits.writeTimeout.
type deadlines struct {
	body, write time.Duration
}

// bound puts a request under the node's deadlines: its body, when it announces one,
// must arrive within the body timeout (so must any part of it the handler leaves for
// net/http to drain), and its answer be taken within the write timeout.
func (d *deadlines) bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		write := d.write
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			body := d.body
			if rc.SetReadDeadline(time.Now().Add(body)) == nil {
				db := &deadlineBody{ReadCloser: r.Body, rc: rc}
				r.Body = db
				// An answer written while the body is still unread (a 404, a health probe,
				// a refusal: nothing that needs the body) would wait for net/http to drain
				// it first, for up to the body timeout: cut it instead (rejectDrain).
				w = &cutUnreadBody{ResponseWriter: w, r: r, body: db}
			}
			// net/http drains an unread body before it writes the answer's headers.
			write += body
		}
		// Writers that cannot take a deadline (tests' recorders) are left alone.
		rc.SetWriteDeadline(time.Now().Add(write))
		next.ServeHTTP(w, r)
	})
}

// rejectDrain is how long a request refused before its body was read may still take to
// deliver that body (read and dropped, so the refusal is not lost to a reset).
const rejectDrain = 100 * time.Millisecond

// cutBody is for a request refused before its body was read: the connection closes
// after the answer, and the rest of the body is waited for rejectDrain at most instead
// of the body timeout, so a refused client with a slow body frees its slot at once.
func cutBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(rejectDrain))
}

// armWrite gives the answer the write timeout from now: a long-poll calls it once its
// wait ends.
func (d *deadlines) armWrite(w http.ResponseWriter) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d.write))
}

// deadlineBody lifts the body deadline once the whole body has been read, so the rest
// of the request (net/http's watch for the client going away) is not cut by it.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// cutUnreadBody applies cutBody when the answer starts before the body was read
// through.
type cutUnreadBody struct {
	http.ResponseWriter
	r       *http.Request
	body    *deadlineBody
	started bool
}

func (c *cutUnreadBody) WriteHeader(code int) {
	if !c.started {
		c.started = true
		if !c.body.done {
			cutBody(c.ResponseWriter, c.r)
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *cutUnreadBody) Write(b []byte) (int, error) {
	if !c.started {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (c *cutUnreadBody) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// listen caps the connections of ln (API.Listen).
func (g *connGuard) listen(ln net.Listener, total, reserved, perSource int) net.Listener {
	l := newConnLimiter(ln, total, reserved, perSource, func(remote string) {
		g.refused.conn(remote, total)
	})
	g.conns.Store(l)
	return l
}

// ConnContext marks the requests of a reserved connection and carries the connection's
// age to them (http.Server.ConnContext for a listener from Listen).
func ConnContext(ctx context.Context, c net.Conn) context.Context { return connContext(ctx, c) }
