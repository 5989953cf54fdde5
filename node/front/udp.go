package front

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/scafo/ingress/internal/bucket"
	"github.com/scafo/ingress/node/front/quic"
)

// UDPConfig is the QUIC side of the front (443/udp). Zero values take the defaults
// withDefaults names.
type UDPConfig struct {
	// Fallback is where a QUIC connection that no passthrough route takes is relayed
	// (Traefik's HTTP/3 entry point on an internal address; the client's address is
	// lost there: a QUIC flow carries no PROXY header). Empty: such connections are
	// dropped, and clients fall back to TCP.
	Fallback string
	// MaxFlows caps the flows (client connections) held at once (default 4096). The
	// flows of one client address to one upstream share a connected UDP socket: at
	// most maxLinksPerFlow sockets (file descriptors) per flow, one per client address
	// it moved through.
	MaxFlows int
	// MaxHeldPerFlow caps the bytes one flow holds before its upstream answers: the
	// client's first datagrams (kept for a failover's replay) and its CRYPTO stream
	// reassembly (default 32 KiB).
	MaxHeldPerFlow int
	// MaxHeldTotal caps those bytes over every flow (default 16 MiB).
	MaxHeldTotal int
	// NewFlowsPerSecond and NewFlowsBurst rate-limit new flows per source network (an
	// IPv4 /24, an IPv6 /64): defaults 20 a second, bursts of 40.
	NewFlowsPerSecond float64
	NewFlowsBurst     int
	// UnansweredTimeout expires a flow that is not established (default 10 s from its
	// first datagram). A flow is established once its upstream has answered and both
	// sides have then sent a short header (1-RTT) packet, the upstream's to the client's
	// connection ID: a server sends those only once a handshake with a client that
	// receives at its address has progressed, so a sender of spoofed Initials cannot
	// hold a flow past UnansweredTimeout (TestQUICABlindSpooferCannotEstablishAFlow).
	UnansweredTimeout time.Duration
	// IdleTimeout expires an established flow that carried nothing either way for
	// that long (default 3 min; QUIC servers' idle timeouts are usually 30 s).
	IdleTimeout time.Duration
	// DialTimeout is how long an upstream may stay silent before the flow's held
	// datagrams are replayed to the next one (default 1 s). A refusal (ICMP port
	// unreachable, seen as ECONNREFUSED on the upstream socket) moves on at once.
	DialTimeout time.Duration
	// Refuse are further addresses no passthrough route may send a flow to (the node
	// APIs the front follows, the TLS fallback), beside Fallback and the relay's own
	// socket, which it refuses by itself (guard.go).
	Refuse []string
}

func (c UDPConfig) withDefaults() UDPConfig {
	if c.MaxFlows <= 0 {
		c.MaxFlows = 4096
	}
	if c.MaxHeldPerFlow <= 0 {
		c.MaxHeldPerFlow = 32 << 10
	}
	if c.MaxHeldTotal <= 0 {
		c.MaxHeldTotal = 16 << 20
	}
	if c.NewFlowsPerSecond <= 0 {
		c.NewFlowsPerSecond = 20
	}
	if c.NewFlowsBurst <= 0 {
		c.NewFlowsBurst = 40
	}
	if c.UnansweredTimeout <= 0 {
		c.UnansweredTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 3 * time.Minute
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = time.Second
	}
	return c
}

// minInitialDatagram: a client's Initial datagrams are at least this long (RFC 9000
// §14.1). Anything shorter opens no flow, so a flow costs a sender 1200 bytes.
const minInitialDatagram = 1200

// maxRateBuckets bounds the per-network rate limit's state. When full, a network
// without a bucket opens no flow until the sweep frees idle buckets.
const maxRateBuckets = 1 << 16

// maxAmbiguousLinks bounds the upstream sockets one ambiguous client datagram is
// sent to.
const maxAmbiguousLinks = 4

// maxLinksPerFlow bounds the upstream sockets one flow keeps: one per client address
// it came from (its first, and those it moved to), so that the application sees each
// address as it would without the front, and validates a new one itself.
const maxLinksPerFlow = 2

// maxCIDsPerFlow bounds the server connection IDs a flow learns from long headers.
const maxCIDsPerFlow = 8

// upstreamBufSize is the largest datagram relayed from an upstream (QUIC servers send
// at most their max_udp_payload_size; quic-go's is 1452 bytes). A longer one is dropped.
const upstreamBufSize = 4096

// UDPStats are the relay's counters since it started (Flows: now).
type UDPStats struct {
	Flows            int    // flows held now
	FlowsOpened      uint64 // flows a valid first Initial opened
	FlowsRouted      uint64 // flows whose server name a passthrough route took
	FlowsFallback    uint64 // flows relayed to Fallback
	FlowsRefused     uint64 // flows with no route and no fallback, or an unreadable ClientHello
	FlowsFailed      uint64 // flows whose every upstream refused or stayed silent
	Forbidden        uint64 // upstreams not sent to: the front itself, a fallback, a node API (guard.go)
	FlowsExpired     uint64
	Failovers        uint64 // held datagrams replayed to a next upstream
	Migrations       uint64 // flows moved to a new client address
	Ambiguous        uint64 // client datagrams sent to each of several upstreams (a CID no long header showed, from an address with flows to several)
	Links            int    // upstream sockets now
	ToUpstream       uint64 // datagrams sent to upstreams (replays included)
	ToClient         uint64 // datagrams sent to clients (each one an upstream's)
	DroppedSmall     uint64 // would-be first Initials under 1200 bytes
	DroppedUnmatched uint64 // datagrams of no flow that cannot open one
	DroppedRate      uint64 // first Initials over their network's rate
	DroppedFlowCap   uint64 // first Initials while MaxFlows are held
	DroppedHeld      uint64 // datagrams over a held-bytes cap
	HeldBytes        int    // bytes held now
}

// UDPRelay relays QUIC connections on one UDP socket to the instances of the
// passthrough route of the server name in their ClientHello, without terminating
// anything: a flow is a client connection (client address and first Destination
// Connection ID), relayed over a connected socket to one upstream (upLink). It sends a
// client only what an upstream sent: no version negotiation, no stateless reset, no
// retry of its own. Its state lives in memory only: a restart loses every flow.
type UDPRelay struct {
	cfg   UDPConfig
	table func() *Table
	log   *slog.Logger
	now   func() time.Time
	// event, when set (tests), is called for each decision on a datagram or a flow,
	// with r.mu held: it must not block nor call the relay.
	event func(kind, detail string)

	mu      sync.Mutex
	pc      *net.UDPConn
	guard   *upstreamGuard // set by Serve
	closed  bool
	flows   map[*udpFlow]struct{}
	byKey   map[flowKey]*udpFlow          // client address + a DCID it sends (its first, the server's)
	byCID   map[connID]*udpFlow           // server connection IDs, any client address (migration)
	byAddr  map[netip.AddrPort][]*udpFlow // flows by current client address
	links   map[linkKey]*upLink           // the front's upstream sockets
	cidLens [quic.MaxConnIDLen + 1]int    // learned server CIDs by length (short headers carry no length)
	rate    map[netip.Prefix]*rateEntry   // new flows per source network
	// sent: the DCIDs (a short header's: its first MaxConnIDLen bytes) of the client
	// datagrams of an address sent to several upstreams (ambiguousLocked). An upstream
	// saw them because the relay could not tell whose they were: sentBefore.
	sent  map[netip.AddrPort]*sentIDs
	held  int
	stats UDPStats
	done  chan struct{}
	wg    sync.WaitGroup
}

// connID is a connection ID as a comparable value.
type connID struct {
	n uint8
	b [quic.MaxConnIDLen]byte
}

func makeConnID(b []byte) connID {
	var c connID
	c.n = uint8(copy(c.b[:], b))
	return c
}

type flowKey struct {
	addr netip.AddrPort
	cid  connID
}

// upLink is the front's connected socket between one client address and one
// upstream. Every flow of that client address to that upstream shares it, so the
// upstream sees the client's connections as the client sent them, from one address,
// and tells them apart by connection ID itself, as it would without the front: a
// packet the front cannot attribute to one flow (a client switched to a CID only the
// encrypted NEW_CONNECTION_ID frames announced) still reaches the right socket.
type upLink struct {
	key    linkKey
	conn   *net.UDPConn
	client netip.AddrPort // where what the socket receives goes (never changes)
	flows  []*udpFlow
	closed bool
	lastUp time.Time // when the upstream last sent on it
}

type linkKey struct {
	client   netip.AddrPort
	upstream string
}

type rateEntry struct {
	b    bucket.Bucket
	last time.Time
}

type flowState uint8

const (
	flowCollecting  flowState = iota // reading the ClientHello
	flowDialing                      // routed; the current upstream has not answered
	flowAnswered                     // the upstream answered; no failover any more
	flowEstablished                  // both sides sent short headers (UDPConfig.UnansweredTimeout)
	flowRefused                      // dropped (no route, unreadable): a tombstone until expiry
	flowClosed
)

type udpFlow struct {
	first     flowKey
	client    netip.AddrPort
	state     flowState
	opened    time.Time
	last      time.Time
	hello     *quic.HelloReader
	held      [][]byte
	heldBytes int
	name      string
	upstreams []string
	next      int
	fallback  bool      // relayed to cfg.Fallback: no passthrough route
	link      *upLink   // where the client's datagrams go: the socket of its current address
	links     []*upLink // every socket the flow uses, link included (maxLinksPerFlow)
	clientCID connID    // the SCID of the client's first Initial: the DCID of the server's packets
	gen       int
	timer     *time.Timer
	cids      []connID
	// clientShort, upShort: the client, the upstream sent a short header packet since
	// the upstream answered (both: established).
	clientShort, upShort bool
}

// NewUDPRelay returns a relay that looks names up in table() (called per new flow).
func NewUDPRelay(cfg UDPConfig, table func() *Table, log *slog.Logger) *UDPRelay {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &UDPRelay{
		cfg:    cfg.withDefaults(),
		table:  table,
		log:    log,
		now:    time.Now,
		flows:  make(map[*udpFlow]struct{}),
		byKey:  make(map[flowKey]*udpFlow),
		byCID:  make(map[connID]*udpFlow),
		byAddr: make(map[netip.AddrPort][]*udpFlow),
		links:  make(map[linkKey]*upLink),
		rate:   make(map[netip.Prefix]*rateEntry),
		sent:   make(map[netip.AddrPort]*sentIDs),
		done:   make(chan struct{}),
	}
}

// Stats returns the counters.
func (r *UDPRelay) Stats() UDPStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Flows = len(r.flows)
	s.Links = len(r.links)
	s.HeldBytes = r.held
	return s
}

// Serve relays the datagrams pc receives until Close (then it returns nil) or a read
// fails otherwise. One Serve per relay.
func (r *UDPRelay) Serve(pc *net.UDPConn) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	if r.pc != nil {
		r.mu.Unlock()
		return errors.New("front: UDPRelay.Serve called twice")
	}
	r.pc = pc
	es := []guardEntry{{pc.LocalAddr().String(), "the front's own socket"}}
	if r.cfg.Fallback != "" {
		es = append(es, guardEntry{r.cfg.Fallback, "the fallback"})
	}
	for _, a := range r.cfg.Refuse {
		es = append(es, guardEntry{a, "an address of the front's own (a node API, a fallback)"})
	}
	r.guard = newUpstreamGuard(es)
	r.mu.Unlock()
	r.wg.Add(1)
	go r.sweeper()
	buf := make([]byte, 64<<10)
	for {
		n, src, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			r.mu.Lock()
			closed := r.closed
			r.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.ECONNREFUSED) {
				continue
			}
			return fmt.Errorf("front: reading 443/udp: %w", err)
		}
		r.fromClient(buf[:n], netip.AddrPortFrom(src.Addr().Unmap(), src.Port()))
	}
}

// Close stops Serve (it closes the socket Serve reads) and every flow.
func (r *UDPRelay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	pc := r.pc
	for f := range r.flows {
		r.removeLocked(f)
	}
	r.mu.Unlock()
	var err error
	if pc != nil {
		err = pc.Close()
	}
	r.wg.Wait()
	return err
}

func (r *UDPRelay) sweeper() {
	defer r.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
			r.sweep(r.now())
		}
	}
}

// sweep expires flows and frees idle rate buckets at now; it returns the flows expired.
func (r *UDPRelay) sweep(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for f := range r.flows {
		if f.state == flowEstablished && now.Sub(f.last) >= r.cfg.IdleTimeout ||
			f.state != flowEstablished && now.Sub(f.opened) >= r.cfg.UnansweredTimeout {
			r.removeLocked(f)
			r.stats.FlowsExpired++
			r.eventLocked("expired", f.name)
			n++
		}
	}
	// A bucket untouched for as long as it takes to refill is full: forget it.
	full := time.Duration(float64(r.cfg.NewFlowsBurst) / r.cfg.NewFlowsPerSecond * float64(time.Second))
	for p, e := range r.rate {
		if now.Sub(e.last) >= full {
			delete(r.rate, p)
		}
	}
	return n
}

func (r *UDPRelay) eventLocked(kind, detail string) {
	if r.event != nil {
		r.event(kind, detail)
	}
}

// fromClient handles one datagram a client sent.
func (r *UDPRelay) fromClient(b []byte, src netip.AddrPort) {
	now := r.now()
	r.mu.Lock()
	f, moved, learn := r.matchLocked(b, src)
	if f == nil {
		if links := r.ambiguousLocked(b, src, now); len(links) > 0 {
			r.mu.Unlock()
			for _, l := range links {
				_, _ = l.conn.Write(b)
			}
			return
		}
		r.openLocked(b, src, now)
		r.mu.Unlock()
		return
	}
	if moved {
		r.moveLocked(f, src)
	}
	if learn.n > 0 && len(f.cids) < maxCIDsPerFlow {
		// A CID the client switched to is learned while there is room, never in place
		// of one the server showed: a sender of made-up CIDs from the flow's address
		// (someone who moved it there with one seen CID) cannot make the relay forget
		// the CIDs the real client's packets carry.
		r.addCIDLocked(f, learn)
	}
	f.last = now
	var l *upLink
	switch f.state {
	case flowCollecting:
		if !r.holdLocked(f, b) {
			break
		}
		r.readHelloLocked(f, b)
	case flowDialing:
		r.holdLocked(f, b) // for a replay; sent either way
		l = f.link
	case flowAnswered:
		if !quic.IsLongHeader(b) && !moved {
			f.clientShort = true
			r.establishLocked(f)
		}
		l = f.link
	case flowEstablished:
		l = f.link
	}
	if l != nil {
		r.stats.ToUpstream++
	}
	r.mu.Unlock()
	if l != nil {
		if _, err := l.conn.Write(b); errors.Is(err, syscall.ECONNREFUSED) {
			r.linkRefused(l)
		}
	}
}

// establishLocked marks an answered flow established once both sides sent a short
// header.
func (r *UDPRelay) establishLocked(f *udpFlow) {
	if f.state != flowAnswered || !f.clientShort || !f.upShort {
		return
	}
	f.state = flowEstablished
	r.eventLocked("established", f.name)
}

// ambiguousLocked handles a client datagram to a CID no long header showed, from an
// address with several answered flows (one socket, several connections, and clients
// switch to CIDs announced only in encrypted frames): it goes to each socket those
// flows use (most often one: the names of one application share its socket), at most
// maxAmbiguousLinks. A short header marks the flows of a lone socket established. It
// returns nothing for a packet that may open a connection.
func (r *UDPRelay) ambiguousLocked(b []byte, src netip.AddrPort, now time.Time) []*upLink {
	fs := r.byAddr[src]
	if len(fs) < 2 || opensConnection(b) {
		return nil
	}
	var links []*upLink
	for _, f := range fs {
		if (f.state == flowAnswered || f.state == flowEstablished) && f.link != nil && !slices.Contains(links, f.link) {
			links = append(links, f.link)
		}
	}
	if len(links) > maxAmbiguousLinks {
		links = links[:maxAmbiguousLinks]
	}
	if len(links) > 1 {
		r.sentLocked(b, src)
	}
	for _, f := range fs {
		if f.link == nil || !slices.Contains(links, f.link) || f.state < flowAnswered || f.state > flowEstablished {
			continue
		}
		f.last = now
		if len(links) == 1 && f.state == flowAnswered && !quic.IsLongHeader(b) {
			f.clientShort = true
			r.establishLocked(f)
		}
	}
	if len(links) > 1 {
		r.stats.Ambiguous++
	}
	r.stats.ToUpstream += uint64(len(links))
	return links
}

// matchLocked finds the flow of a client datagram: by its DCID at this address (the
// client's first DCID, or a server CID learned from a long header), then by a server
// CID from any address (the client moved: NAT rebinding). Clients also switch to CIDs
// the server announced in encrypted NEW_CONNECTION_ID frames, which the relay cannot
// read: a Handshake or short header packet to an unknown CID goes to the flow of its
// address when that address has exactly one answered flow, and the relay learns the CID
// (learn).
func (r *UDPRelay) matchLocked(b []byte, src netip.AddrPort) (f *udpFlow, moved bool, learn connID) {
	if len(b) == 0 {
		return nil, false, learn
	}
	if quic.IsLongHeader(b) {
		if len(b) < 6 || int(b[5]) > quic.MaxConnIDLen || len(b) < 6+int(b[5]) {
			return nil, false, learn
		}
		cid := makeConnID(b[6 : 6+int(b[5])])
		if f := r.byKey[flowKey{src, cid}]; f != nil {
			return f, false, learn
		}
		if f := r.byCID[cid]; f != nil && cid.n > 0 && (f.client == src || !r.sentBefore(src, cid)) {
			return f, f.client != src, learn
		}
		if f := r.onlyFlowLocked(src); f != nil && !opensConnection(b) {
			return f, false, cid
		}
		return nil, false, learn
	}
	for l := quic.MaxConnIDLen; l > 0; l-- {
		if r.cidLens[l] == 0 || len(b) < 1+l {
			continue
		}
		cid := makeConnID(b[1 : 1+l])
		if f := r.byKey[flowKey{src, cid}]; f != nil {
			return f, false, learn
		}
		if f := r.byCID[cid]; f != nil && (f.client == src || !r.sentBefore(src, cid)) {
			return f, f.client != src, learn
		}
	}
	if f := r.onlyFlowLocked(src); f != nil {
		// A new CID is as long as the server's others (a server picks one length).
		if len(f.cids) > 0 && len(b) > int(f.cids[0].n) {
			learn = makeConnID(b[1 : 1+f.cids[0].n])
		}
		return f, false, learn
	}
	return nil, false, learn
}

// opensConnection reports whether a long header packet is a client's first Initial
// of a new connection: an Initial that decrypts with the keys of its own DCID. Other
// Initials (and Handshake packets) to an unknown CID continue a connection.
func opensConnection(b []byte) bool {
	h, err := quic.ParseLongHeader(b)
	if err != nil || h.Type != quic.TypeInitial {
		return false
	}
	if len(h.DCID) < 8 || len(b) < minInitialDatagram {
		return false
	}
	k, err := quic.ClientInitialKeys(h.Version, h.DCID)
	if err != nil {
		return false
	}
	_, _, err = k.Open(b, h)
	return err == nil
}

// onlyFlowLocked is the one answered flow of a client address (nil when it has none
// or several: a socket that carries several connections needs their CIDs).
func (r *UDPRelay) onlyFlowLocked(src netip.AddrPort) *udpFlow {
	var only *udpFlow
	for _, f := range r.byAddr[src] {
		if f.state == flowAnswered || f.state == flowEstablished {
			if only != nil {
				return nil
			}
			only = f
		}
	}
	return only
}

// openLocked opens a flow for a datagram of no flow, if it is a client's first
// Initial (v1 or v2) of at least 1200 bytes, its network is under its rate, and the
// caps hold. Anything else is dropped.
func (r *UDPRelay) openLocked(b []byte, src netip.AddrPort, now time.Time) {
	h, err := quic.ParseLongHeader(b)
	if err != nil || h.Type != quic.TypeInitial || len(h.DCID) < 8 {
		r.stats.DroppedUnmatched++
		r.eventLocked("unmatched", "")
		return
	}
	if len(b) < minInitialDatagram {
		r.stats.DroppedSmall++
		r.eventLocked("small", "")
		return
	}
	if r.closed || r.pc == nil {
		return
	}
	if len(r.flows) >= r.cfg.MaxFlows {
		r.stats.DroppedFlowCap++
		r.eventLocked("flowcap", "")
		return
	}
	if r.held+len(b) > r.cfg.MaxHeldTotal {
		r.stats.DroppedHeld++
		r.eventLocked("held", "")
		return
	}
	if !r.allowLocked(src, now) {
		r.stats.DroppedRate++
		r.eventLocked("rate", "")
		return
	}
	f := &udpFlow{
		first:     flowKey{src, makeConnID(h.DCID)},
		clientCID: makeConnID(h.SCID),
		client:    src,
		opened:    now,
		last:      now,
		hello:     quic.NewHelloReader(0, 0),
	}
	r.flows[f] = struct{}{}
	r.byKey[f.first] = f
	r.byAddr[src] = append(r.byAddr[src], f)
	r.stats.FlowsOpened++
	r.eventLocked("opened", "")
	if r.holdLocked(f, b) {
		r.readHelloLocked(f, b)
	}
}

func (r *UDPRelay) allowLocked(src netip.AddrPort, now time.Time) bool {
	bits := 64
	if src.Addr().Is4() {
		bits = 24
	}
	p, err := src.Addr().Prefix(bits)
	if err != nil {
		return false
	}
	e := r.rate[p]
	if e == nil {
		if len(r.rate) >= maxRateBuckets {
			return false
		}
		e = &rateEntry{b: bucket.New(r.cfg.NewFlowsPerSecond, float64(r.cfg.NewFlowsBurst))}
		r.rate[p] = e
	}
	e.last = now
	ok, _ := e.b.Take(now)
	return ok
}

// holdLocked keeps a copy of a datagram for a replay, within the caps.
func (r *UDPRelay) holdLocked(f *udpFlow, b []byte) bool {
	if f.heldBytes+len(b) > r.cfg.MaxHeldPerFlow || r.held+len(b) > r.cfg.MaxHeldTotal {
		r.stats.DroppedHeld++
		r.eventLocked("held", "")
		return false
	}
	f.held = append(f.held, append([]byte(nil), b...))
	f.heldBytes += len(b)
	r.held += len(b)
	return true
}

func (r *UDPRelay) releaseLocked(f *udpFlow) {
	r.held -= f.heldBytes
	f.held, f.heldBytes, f.hello = nil, 0, nil
}

// readHelloLocked feeds a held datagram to the flow's ClientHello reader and routes
// the flow once the ClientHello is whole.
func (r *UDPRelay) readHelloLocked(f *udpFlow, b []byte) {
	before := f.hello.Buffered()
	hello, err := f.hello.Feed(b)
	if grown := f.hello.Buffered() - before; grown > 0 {
		f.heldBytes += grown
		r.held += grown
	}
	if err == nil && (f.heldBytes > r.cfg.MaxHeldPerFlow || r.held > r.cfg.MaxHeldTotal) {
		err = quic.ErrTooLarge
	}
	if err != nil {
		r.refuseLocked(f, "unreadable Initial: "+err.Error())
		return
	}
	if hello == nil {
		return
	}
	name, ok := ServerName(hello)
	var rt *Route
	if ok {
		rt, ok = r.table().Lookup(name)
	}
	switch {
	case ok:
		f.name, f.upstreams = rt.Name, rt.Upstreams
		r.stats.FlowsRouted++
		r.eventLocked("routed", rt.Name)
	case r.cfg.Fallback != "":
		f.upstreams, f.fallback = []string{r.cfg.Fallback}, true
		r.stats.FlowsFallback++
		r.eventLocked("fallback", name)
	default:
		r.refuseLocked(f, "no passthrough route")
		return
	}
	f.hello = nil
	f.state = flowDialing
	r.dialNextLocked(f)
}

func (r *UDPRelay) refuseLocked(f *udpFlow, why string) {
	r.log.Debug("quic flow dropped", "client", f.client, "reason", why)
	r.releaseLocked(f)
	f.state = flowRefused
	r.stats.FlowsRefused++
	r.eventLocked("refused", why)
}

// dialNextLocked moves the flow to its next upstream, in document order, and replays
// the held datagrams to it. With none left, the flow is refused.
func (r *UDPRelay) dialNextLocked(f *udpFlow) {
	r.leaveLinkLocked(f)
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	for f.next < len(f.upstreams) {
		addr := f.upstreams[f.next]
		f.next++
		if why := r.guard.refuse(addr); why != "" && !f.fallback {
			r.stats.Forbidden++
			r.log.Warn("quic: a passthrough route names an address no route may reach: not sent to",
				"name", f.name, "upstream", addr, "reason", why)
			continue
		}
		l, err := r.linkLocked(f.client, addr)
		if err != nil {
			r.log.Warn("quic upstream socket", "name", f.name, "upstream", addr, "error", err)
			continue
		}
		// The kernel reports an ICMP refusal on the socket's next call, a write as well
		// as a read: a replay that meets one moves on at once.
		refused := false
		for _, d := range f.held {
			r.stats.ToUpstream++
			if _, err := l.conn.Write(d); errors.Is(err, syscall.ECONNREFUSED) {
				refused = true
				break
			}
		}
		if refused {
			if len(l.flows) == 0 {
				r.closeLinkLocked(l)
			}
			r.log.Info("quic upstream failed", "name", f.name, "upstream", addr, "reason", "refused")
			if f.next < len(f.upstreams) {
				r.stats.Failovers++
				r.eventLocked("failover", "refused")
			}
			continue
		}
		l.flows = append(l.flows, f)
		f.link, f.links = l, []*upLink{l}
		f.gen++
		gen := f.gen
		f.timer = time.AfterFunc(r.cfg.DialTimeout, func() { r.upstreamFailed(f, gen, "silent") })
		return
	}
	r.stats.FlowsFailed++
	r.eventLocked("failed", f.name)
	r.log.Warn("quic flow: no upstream answered", "name", f.name, "client", f.client)
	r.releaseLocked(f)
	f.state = flowRefused
}

// linkLocked is the socket between client and upstream, opened if there is none.
func (r *UDPRelay) linkLocked(client netip.AddrPort, upstream string) (*upLink, error) {
	k := linkKey{client, upstream}
	if l := r.links[k]; l != nil {
		return l, nil
	}
	raddr, err := resolveUDP(upstream)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil, err
	}
	l := &upLink{key: k, conn: conn, client: client}
	r.links[k] = l
	r.wg.Add(1)
	go r.fromUpstream(l)
	return l, nil
}

func (r *UDPRelay) closeLinkLocked(l *upLink) {
	if l.closed {
		return
	}
	l.closed = true
	_ = l.conn.Close()
	if r.links[l.key] == l {
		delete(r.links, l.key)
	}
}

// leaveLinkLocked takes the flow off its sockets, each closed once no flow uses it.
func (r *UDPRelay) leaveLinkLocked(f *udpFlow) {
	for _, l := range f.links {
		r.dropFromLinkLocked(f, l)
	}
	f.link, f.links = nil, nil
}

func (r *UDPRelay) dropFromLinkLocked(f *udpFlow, l *upLink) {
	if i := slices.Index(l.flows, f); i >= 0 {
		l.flows = slices.Delete(l.flows, i, i+1)
	}
	if len(l.flows) == 0 {
		r.closeLinkLocked(l)
	}
}

// joinLinkLocked makes l the flow's current socket, keeping its others; past
// maxLinksPerFlow it leaves the one its upstream sent on least recently (a socket of
// an address that only sent packets the application dropped has none).
func (r *UDPRelay) joinLinkLocked(f *udpFlow, l *upLink) {
	f.link = l
	if slices.Contains(f.links, l) {
		return
	}
	l.flows = append(l.flows, f)
	f.links = append(f.links, l)
	if len(f.links) <= maxLinksPerFlow {
		return
	}
	old := -1
	for i, k := range f.links {
		if k != l && (old < 0 || k.lastUp.Before(f.links[old].lastUp)) {
			old = i
		}
	}
	r.dropFromLinkLocked(f, f.links[old])
	f.links = slices.Delete(f.links, old, old+1)
}

// resolveUDP resolves an upstream address: a routing document's are "ip:port" and take
// no lookup; a configured Fallback may name a host.
func resolveUDP(addr string) (*net.UDPAddr, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return net.UDPAddrFromAddrPort(ap), nil
	}
	return net.ResolveUDPAddr("udp", addr)
}

// upstreamFailed moves a flow whose current upstream (attempt gen) stayed silent to
// the next one; an upstream that answered already keeps the flow.
func (r *UDPRelay) upstreamFailed(f *udpFlow, gen int, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failLocked(f, gen, why)
}

func (r *UDPRelay) failLocked(f *udpFlow, gen int, why string) {
	if f.gen != gen || f.state != flowDialing {
		return
	}
	r.log.Info("quic upstream failed", "name", f.name, "upstream", f.upstreams[f.next-1], "reason", why)
	if f.next < len(f.upstreams) {
		r.stats.Failovers++
		r.eventLocked("failover", why)
	}
	r.dialNextLocked(f)
}

// linkRefused moves the flows of a socket whose upstream refused (ICMP port
// unreachable) and has not answered them yet to their next upstreams.
func (r *UDPRelay) linkRefused(l *upLink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range slices.Clone(l.flows) {
		if f.state == flowDialing {
			r.failLocked(f, f.gen, "refused")
		}
	}
}

// fromUpstream relays what one upstream socket receives to its client, and learns
// the server's connection IDs from its long headers.
func (r *UDPRelay) fromUpstream(l *upLink) {
	defer r.wg.Done()
	buf := make([]byte, upstreamBufSize)
	for {
		n, _, flags, _, err := l.conn.ReadMsgUDPAddrPort(buf, nil)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				r.linkRefused(l)
				continue
			}
			return // closed (no flow left, Close)
		}
		if flags&syscall.MSG_TRUNC != 0 {
			continue
		}
		d := buf[:n]
		r.mu.Lock()
		if l.closed {
			r.mu.Unlock()
			return
		}
		now := r.now()
		l.lastUp = now
		if f := attribute(l, d); f != nil {
			if f.state == flowDialing {
				f.state = flowAnswered
				r.eventLocked("answered", f.name)
				if f.timer != nil {
					f.timer.Stop()
					f.timer = nil
				}
				r.releaseLocked(f)
			}
			r.learnLocked(f, d)
			f.last = now
		} else {
			for _, g := range l.flows {
				if g.state == flowAnswered || g.state == flowEstablished {
					g.last = now
				}
			}
		}
		if !quic.IsLongHeader(d) {
			// A short header to a flow's client CID: the upstream's half of establishing
			// it (every answered flow of the socket with that CID: one socket whose
			// connections have zero-length CIDs cannot tell them apart, and neither can we).
			for _, g := range l.flows {
				if g.state == flowAnswered && toClientCID(g, d) {
					g.upShort = true
					r.establishLocked(g)
				}
			}
		}
		client, pc := l.client, r.pc
		r.stats.ToClient++
		r.mu.Unlock()
		_, _ = pc.WriteToUDPAddrPort(d, client)
	}
}

// attribute finds the flow of a socket an upstream's datagram belongs to: the only
// one, the one whose client CID is the datagram's DCID, or for a long header the one
// awaiting an answer (nil when none or several).
func attribute(l *upLink, d []byte) *udpFlow {
	if len(l.flows) == 1 {
		return l.flows[0]
	}
	var found *udpFlow
	for _, f := range l.flows {
		n := int(f.clientCID.n)
		var dcid []byte
		if quic.IsLongHeader(d) {
			if len(d) < 6 || int(d[5]) != n || len(d) < 6+n {
				continue
			}
			dcid = d[6 : 6+n]
		} else {
			if len(d) < 1+n {
				continue
			}
			dcid = d[1 : 1+n]
		}
		if bytes.Equal(dcid, f.clientCID.b[:n]) {
			if found != nil {
				found = nil
				break
			}
			found = f
		}
	}
	if found == nil && quic.IsLongHeader(d) {
		// A server answers a new connection with long headers: the socket's one flow
		// that awaits an answer has it (a client that retried from its socket with
		// zero-length CIDs has an older flow beside it).
		for _, f := range l.flows {
			if f.state == flowDialing {
				if found != nil {
					return nil
				}
				found = f
			}
		}
	}
	return found
}

// toClientCID reports whether a short header packet of an upstream is addressed to the
// connection ID the client chose in its first Initial (a stateless reset, which a
// server may send for a packet it cannot place, carries random bytes there).
func toClientCID(f *udpFlow, d []byte) bool {
	n := int(f.clientCID.n)
	return len(d) >= 1+n && bytes.Equal(d[1:1+n], f.clientCID.b[:n])
}

// sentIDs are the DCIDs an address sent to several upstreams: the first
// maxCIDsPerFlow, then full (every ID counts as sent: the relay learns no more for the
// address's flows, whose packets still reach them, sent to each of its upstreams).
type sentIDs struct {
	ids  []connID
	full bool
}

// sentLocked records the DCID of a client datagram the relay sent to several
// upstreams.
func (r *UDPRelay) sentLocked(b []byte, src netip.AddrPort) {
	var c connID
	if quic.IsLongHeader(b) {
		if len(b) < 6 || int(b[5]) > quic.MaxConnIDLen || len(b) < 6+int(b[5]) {
			return
		}
		c = makeConnID(b[6 : 6+int(b[5])])
	} else {
		c = makeConnID(b[1:min(len(b), 1+quic.MaxConnIDLen)])
	}
	s := r.sent[src]
	if s == nil {
		s = &sentIDs{}
		r.sent[src] = s
	}
	switch {
	case s.full || slices.Contains(s.ids, c):
	case len(s.ids) == maxCIDsPerFlow:
		s.full, s.ids = true, nil
	default:
		s.ids = append(s.ids, c)
	}
}

// sentBefore reports whether c is (the start of) a DCID the client at src sent to
// several upstreams. Such an ID is never learned from an upstream, and a packet from
// src carrying it is never taken for another address's flow moving to src: another
// tenant's instance may have seen it and claimed it through a flow of its own.
func (r *UDPRelay) sentBefore(src netip.AddrPort, c connID) bool {
	s := r.sent[src]
	if s == nil {
		return false
	}
	if s.full {
		return true
	}
	for _, id := range s.ids {
		if id.n >= c.n && bytes.Equal(id.b[:c.n], c.b[:c.n]) {
			return true
		}
	}
	return false
}

// learnLocked records the Source Connection IDs of the long header packets in an
// upstream's datagram: the client addresses its later packets to them. A server shows
// its IDs before a client uses them; one the client already sent to several upstreams
// is not learned (a tenant's instance that saw another's ID would claim it).
// TestQUICATenantCannotClaimAConnectionIDItSawForAnotherTenant.
func (r *UDPRelay) learnLocked(f *udpFlow, d []byte) {
	for len(d) > 0 && quic.IsLongHeader(d) {
		h, err := quic.ParseLongHeader(d)
		if err != nil {
			return
		}
		if c := makeConnID(h.SCID); c.n > 0 && !r.sentBefore(f.client, c) {
			r.addCIDLocked(f, c)
		}
		d = d[h.Len:]
	}
}

// addCIDLocked makes c one of the flow's server connection IDs; past maxCIDsPerFlow
// the oldest is forgotten.
func (r *UDPRelay) addCIDLocked(f *udpFlow, c connID) {
	if c.n == 0 || r.byKey[flowKey{f.client, c}] != nil {
		return
	}
	if len(f.cids) >= maxCIDsPerFlow {
		r.dropCIDLocked(f, f.cids[0])
		f.cids = f.cids[1:]
	}
	r.byKey[flowKey{f.client, c}] = f
	if r.byCID[c] == nil {
		r.byCID[c] = f
	}
	f.cids = append(f.cids, c)
	r.cidLens[c.n]++
}

func (r *UDPRelay) dropCIDLocked(f *udpFlow, c connID) {
	if r.byKey[flowKey{f.client, c}] == f {
		delete(r.byKey, flowKey{f.client, c})
	}
	if r.byCID[c] == f {
		delete(r.byCID, c)
	}
	r.cidLens[c.n]--
}

// moveLocked moves a flow to the client address its packet came from.
func (r *UDPRelay) moveLocked(f *udpFlow, src netip.AddrPort) {
	for _, c := range f.cids {
		if r.byKey[flowKey{f.client, c}] == f {
			delete(r.byKey, flowKey{f.client, c})
		}
		r.byKey[flowKey{src, c}] = f
	}
	r.dropAddrLocked(f)
	if l := f.link; l != nil {
		// The new address gets a socket of its own (shared by the connections of the
		// client's new socket, as the old one was): the application sees the client
		// move, as it would without the front, and validates the new path itself
		// (RFC 9000 §9) before it sends there; the old socket keeps answering the old
		// address meanwhile. A packet that does not authenticate (someone who saw a
		// connection ID) is dropped by the application and moves nothing.
		if nl, err := r.linkLocked(src, l.key.upstream); err == nil {
			r.joinLinkLocked(f, nl)
		} else {
			r.log.Warn("quic upstream socket", "name", f.name, "upstream", l.key.upstream, "error", err)
		}
	}
	f.client = src
	r.byAddr[src] = append(r.byAddr[src], f)
	r.stats.Migrations++
	r.eventLocked("moved", src.String())
}

func (r *UDPRelay) dropAddrLocked(f *udpFlow) {
	fs := r.byAddr[f.client]
	for i, g := range fs {
		if g == f {
			fs = append(fs[:i], fs[i+1:]...)
			break
		}
	}
	if len(fs) == 0 {
		delete(r.byAddr, f.client)
		delete(r.sent, f.client)
	} else {
		r.byAddr[f.client] = fs
	}
}

func (r *UDPRelay) removeLocked(f *udpFlow) {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	r.leaveLinkLocked(f)
	r.releaseLocked(f)
	if r.byKey[f.first] == f {
		delete(r.byKey, f.first)
	}
	for _, c := range f.cids {
		r.dropCIDLocked(f, c)
	}
	f.cids = nil
	r.dropAddrLocked(f)
	delete(r.flows, f)
	f.state = flowClosed
	f.gen++
}
