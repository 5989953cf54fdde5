package fleetsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// The fleet in one process: nodes built with node.NewWithStore over one memStore, each
// through a faultyStore, driven by their steps (node.Steps) on a virtual clock; the API
// served in process (Handler, a recorder); an admin and tenants writing
// through it; ingresses polling it. Every random choice comes from one seeded source,
// and nothing runs beside the simulator's goroutine (no loop is started), so a seed
// replays the same schedule.

const (
	ingressToken = "ingress-secret-0123456789"
	adminToken   = "admin-secret-0123456789"
	readToken    = "readonly-secret-0123456789"
	platform     = "apps.example.com"

	heartbeat = 15 * time.Second
	nodeTTL   = 60 * time.Second
	apiPort   = 7400
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// simNode is one node: its configuration (the state dir outlives a crash unless the
// restart loses it) and its running process (nil while down).
type simNode struct {
	name string
	cfg  *node.Config
	srv  *node.Server
	h    http.Handler
	step node.Steps

	downUntil   int           // the step it restarts at (while srv is nil)
	loseState   bool          // its restart starts from an empty state dir
	skew        time.Duration // its clock minus the fleet's
	nextBeat    time.Time     // its next heartbeat, on its clock
	failP       float64       // the probability its store requests fail
	failUntil   int           // the step its failures end at
	recordFails int           // its record's writes fail until this step (a restart without its state dir)
	flaky       bool          // until failUntil, every other read of its serial fails
	passed      bool          // a pass of this process succeeded
	serialReads int
	downRev     string // the revision it served when it crashed (its state dir remembers it)
	wipeRev     string // while the store is wiped: the revision it must keep serving ("" none)

	// What it served: per process (first: a 200 was served), per name (the serial).
	served200    bool
	lastSerial   uint64
	lastEpoch    string
	lastRevision string
}

// simIngress is a provider plugin: it polls one node, applies what it is given unless
// it is of an older serial than what it holds (DESIGN §6), and reports what it holds.
type simIngress struct {
	name     string
	node     int
	serial   uint64
	epoch    string
	revision string
	doc      []byte
}

type sim struct {
	t     testing.TB
	seed  uint64
	rng   *rand.Rand
	now   time.Time // the fleet's clock
	step  int
	st    *memStore
	nodes []*simNode
	ings  []*simIngress
	m     *model
	log   []logEntry // the schedule so far (printed when an invariant fails)
	docs  docCache   // the documents served, decoded once
	// revs: each revision served, by the bytes of its document; content: each
	// document's bytes without its revision, by the revision first served with them.
	revs    map[string]string
	content map[string]string

	outageUntil int  // every store request fails until this step
	recordsFail bool // no node record can be written (staleFleet)
	failed      bool
	settling    bool // every pass a full one (what a stored but unannounced write waits for)
	// backup is a copy of the store taken earlier; restored: it was put back, and every
	// node refuses the store (foreign) until settle adopts it as the operator would.
	backup   map[string]memObject
	restored bool
	// interleave is a write armed to land in the middle of one through interleaveOn.
	interleave     func()
	interleaveOn   *simNode
	interleaveNode *simNode // the node the landing write goes through
	// The store wiped (unmounted): its objects, the serial included, are away (wiped,
	// nil: mounted) until remountAt, or until remountOn's pass re-reads the serial after
	// listing the wiped store. wipeOn: a wipe armed to land at that node's listing, after
	// its pass read the serial. inPass is the node whose pass runs; listed: it listed
	// since its last read of the serial.
	wiped     map[string]memObject
	remountAt int
	wipeOn    *simNode
	remountOn *simNode
	inPass    *simNode
	listed    bool
}

func newSim(t testing.TB, seed uint64, nodes, ingresses int) *sim {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: t0, m: newModel(),
		revs: map[string]string{}, content: map[string]string{}}
	s.st = newMemStore(func() time.Time { return s.now })
	for i := range nodes {
		n := &simNode{name: fmt.Sprintf("vps-%c", 'a'+i)}
		n.cfg = s.config(n.name, i)
		s.nodes = append(s.nodes, n)
		s.start(n)
	}
	for i := range ingresses {
		s.ings = append(s.ings, &simIngress{name: fmt.Sprintf("edge-%d", i), node: i % nodes})
	}
	return s
}

// stateDir is a new state dir: in memory (/dev/shm) when there is one, so the node's
// fsyncs (served.json, instances.json) do not wait on a disk other tests keep busy;
// otherwise the test's temporary directory. The node's code is the same either way.
func (s *sim) stateDir() string {
	if d, err := os.MkdirTemp("/dev/shm", "fleetsim-"); err == nil {
		s.t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return s.t.TempDir()
}

func (s *sim) config(name string, i int) *node.Config {
	cfg := node.NewConfig()
	cfg.StateDir = s.stateDir()
	cfg.Node.Name = name
	cfg.Node.Address = fmt.Sprintf("10.0.0.%d", i+1)
	cfg.Node.APIPort = apiPort
	cfg.Ingress.Token, cfg.Admin.Token, cfg.Readonly.Token = ingressToken, adminToken, readToken
	cfg.Platform.Domains = []string{platform}
	cfg.Listen = "127.0.0.1:" + strconv.Itoa(apiPort)
	cfg.Reconcile.Heartbeat = ptypes.Duration(heartbeat)
	cfg.Reconcile.NodeTTL = ptypes.Duration(nodeTTL)
	cfg.Probe.Interval = 0 // instances are declared ready or not by their tenants
	// Released ports come back within a run: 20 s, not 10 minutes (the floor is
	// 5 x reconcile.interval + 5 s), so that a quarantine that ends too early gives a
	// port peers still route to within the schedule.
	cfg.Ports.Quarantine = ptypes.Duration(20 * time.Second)
	if err := cfg.Validate(); err != nil {
		s.t.Fatal(err)
	}
	return cfg
}

// start builds n's process over its state dir (a new one when it lost its state).
func (s *sim) start(n *simNode) {
	if n.loseState {
		if !s.settling && s.rng.IntN(2) == 0 {
			// Its record cannot be written for a while (its first heartbeats fail): the
			// ports its last record publishes stay held until one is announced.
			n.recordFails = s.step + 10 + s.rng.IntN(40)
			s.logf("%s's record cannot be written until step %d", n.name, n.recordFails)
		}
		s.forget(n)
		n.cfg.StateDir = s.stateDir()
		n.loseState = false
		// Nor does it know what it served: a first start accepts the store as it finds
		// it (docs/design.md §6), a store restored from an older backup included, so its
		// serials are compared from its restart on only (its ingresses keep what they
		// hold until the serial passes it: the plugin's rule).
		n.lastSerial, n.lastEpoch, n.lastRevision, n.downRev = 0, "", "", ""
	}
	fs := faultyStore{Store: s.st, fail: func(op, key string) bool { return s.fails(n, op, key) }, before: func(op, key string) { s.hook(n, op, key) }}
	srv, err := node.NewWithStore(n.cfg, slog.New(slog.DiscardHandler), fs, ingressToken, adminToken)
	if err != nil {
		s.t.Fatalf("seed %d: starting %s: %v", s.seed, n.name, err)
	}
	n.srv, n.h, n.step = srv, srv.Handler(), srv.Steps()
	n.served200, n.passed = false, false
	n.nextBeat = s.clock(n) // the first heartbeat at once, as Run does
}

func (s *sim) fails(n *simNode, op, key string) bool {
	if s.step < s.outageUntil || (s.recordsFail || s.step < n.recordFails) && op == "put" && strings.HasPrefix(key, fleet.PrefixNodes) {
		return true
	}
	if n.flaky && s.step < n.failUntil && key == store.SerialKey {
		// A pass reads the serial, the objects, then the serial again: the second read
		// failing is the window between a complete read and its commit.
		n.serialReads++
		return n.serialReads%2 == 0
	}
	return s.step < n.failUntil && s.rng.Float64() < n.failP
}

func (s *sim) clock(n *simNode) time.Time { return s.now.Add(n.skew) }

// losing: a node is down and restarts without its state dir (lostRestoredFlag).
func (s *sim) losing() bool {
	for _, n := range s.nodes {
		if n.srv == nil && n.loseState {
			return true
		}
	}
	return false
}

// allPassed: every node is up and has committed a serial since it started (so it knows
// the last serial it read, not only what served.json remembers: restoreCrashFlag).
func (s *sim) allPassed() bool {
	for _, n := range s.nodes {
		if n.srv == nil || !n.passed {
			return false
		}
	}
	return true
}

// logEntry is one event of the schedule, formatted only when printed (formatting each
// as it happened was a seventieth of the simulator's CPU). Its arguments are values
// nothing changes afterwards.
type logEntry struct {
	step   int
	format string
	args   []any
}

func (e logEntry) String() string {
	return fmt.Sprintf("step %d: ", e.step) + fmt.Sprintf(e.format, e.args...)
}

func (s *sim) logf(format string, args ...any) {
	s.log = append(s.log, logEntry{s.step, format, args})
}

// schedule is the log's entries from i on, one a line.
func (s *sim) schedule(i int) string {
	lines := make([]string, 0, len(s.log)-i)
	for _, e := range s.log[i:] {
		lines = append(lines, e.String())
	}
	return strings.Join(lines, "\n  ")
}

// fail reports a broken invariant with the seed that replays it and the schedule.
func (s *sim) fail(format string, args ...any) {
	if s.failed {
		return
	}
	s.failed = true
	from := 0
	if len(s.log) > 40 && *seedFlag == 0 { // a replay prints the whole schedule
		from = len(s.log) - 40
	}
	flags := ""
	if !*stateLostFlag {
		flags += " -statelost=false"
	}
	if !*restoreCrashFlag {
		flags += " -restorecrash=false"
	}
	if *lostRestoredFlag {
		flags += " -lostrestored"
	}
	s.t.Errorf("seed %d, step %d: %s\nreplay: go test ./node/internal/fleetsim -run TestFleet -seed=%d%s -v\nlast events:\n  %s",
		s.seed, s.step, fmt.Sprintf(format, args...), s.seed, flags, s.schedule(from))
}

// do serves one request through n's handler. The request is the one
// httptest.NewRequest would build for "http://<address>:<port><path>" (an incoming
// HTTP/1.1 server request from 192.0.2.1:1234), made directly rather than by parsing
// its text (that parse was a thirtieth of the simulator's CPU under -race).
func (s *sim) do(n *simNode, method, path, token string, body any, hdr map[string]string) *recorder {
	host := n.cfg.Node.Address + ":" + strconv.Itoa(apiPort)
	req := &http.Request{
		Method: method, URL: &url.URL{Scheme: "http", Host: host, Path: path}, RequestURI: "http://" + host + path,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: host, RemoteAddr: "192.0.2.1:1234",
		Header: make(http.Header, 2+len(hdr)), Body: http.NoBody,
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := &recorder{Code: http.StatusOK, header: make(http.Header, 16)}
	n.h.ServeHTTP(rec, req)
	if rec.wrote && headerPrint(rec.header) != rec.sent {
		// A real server sends the header at WriteHeader: what a handler sets after it
		// never reaches the client, though the map the checks read shows it.
		s.fail("%s %s on %s: a header was set after the response's header was written", method, path, n.name)
	}
	return rec
}

// recorder is httptest.ResponseRecorder without the copy of the header it takes at
// WriteHeader for its Result (a tenth of a request's cost in the simulator under -race):
// the simulator reads the header as the handler left it (Header), as it read the
// ResponseRecorder's. The rest is the same: the status (200 unless written), the body
// whatever the status, and a Content-Type detected from the body when a write comes
// first and sets none. It keeps a fingerprint of the header as written, and do fails a
// request whose handler changed the header after writing it (a header no client gets).
type recorder struct {
	Code   int
	Body   bytes.Buffer
	header http.Header
	wrote  bool
	sent   uint64 // headerPrint of the header as written, without copying it
}

var printSeed = maphash.MakeSeed()

// headerPrint is a fingerprint of h, the same whatever the map's order: each entry's
// hash summed.
func headerPrint(h http.Header) uint64 {
	var sum uint64
	for k, vs := range h {
		var m maphash.Hash
		m.SetSeed(printSeed)
		m.WriteString(k)
		for _, v := range vs {
			m.WriteByte(0)
			m.WriteString(v)
		}
		sum += m.Sum64()
	}
	return sum
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.wrote {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	r.Code, r.wrote, r.sent = code, true, headerPrint(r.header)
}

// writeHeader is the ResponseRecorder's: a first write without a Content-Type gets
// one detected from its first 512 bytes.
func (r *recorder) writeHeader(b []byte) {
	if r.wrote {
		return
	}
	if _, ok := r.header["Content-Type"]; !ok && r.header.Get("Transfer-Encoding") == "" {
		r.header.Set("Content-Type", http.DetectContentType(b))
	}
	r.WriteHeader(http.StatusOK)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.writeHeader(b)
	r.Body.Write(b)
	if !bodyAllowed(r.Code) {
		return 0, http.ErrBodyNotAllowed
	}
	return len(b), nil
}

func (r *recorder) Flush() { r.WriteHeader(http.StatusOK) }

func bodyAllowed(code int) bool { return code >= 200 && code != 204 && code != 304 }

func (s *sim) up() []*simNode {
	var out []*simNode
	for _, n := range s.nodes {
		if n.srv != nil {
			out = append(out, n)
		}
	}
	return out
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// run runs steps steps, checking the invariants after each, then settles the fleet and
// checks it converged.
func (s *sim) run(steps int) {
	for s.step = 1; s.step <= steps && !s.failed; s.step++ {
		s.now = s.now.Add(time.Second)
		if s.wiped != nil && s.step >= s.remountAt {
			s.remount()
		}
		s.event()
		s.tickNodes()
		s.pollIngresses()
		if s.step%50 == 0 {
			s.settle()
		}
	}
	if !s.failed {
		s.settle()
	}
}

// event is the step's one random event: a write, a tenant's instance change, or a fault.
func (s *sim) event() {
	r := s.rng.IntN(100)
	switch {
	case r < 25:
		s.adminWrite()
	case r < 50:
		s.instanceWrite()
	case r < 60:
		n := pick(s.rng, s.nodes)
		n.failUntil = s.step + 1 + s.rng.IntN(8)
		if n.flaky = s.rng.IntN(5) == 0; n.flaky {
			n.failP = 0
			s.logf("every other serial read of %s fails until step %d", n.name, n.failUntil)
		} else {
			n.failP = []float64{0.1, 0.3, 0.6, 1}[s.rng.IntN(4)]
			s.logf("store faults on %s (p=%.1f) until step %d", n.name, n.failP, n.failUntil)
		}
	case r < 62:
		s.outageUntil = s.step + 1 + s.rng.IntN(10)
		s.logf("store outage until step %d", s.outageUntil)
	case r < 66:
		if n := pick(s.rng, s.nodes); n.srv != nil && (!s.restored || *restoreCrashFlag) {
			s.crash(n, 1+s.rng.IntN(20), s.rng.IntN(3) == 0 && *stateLostFlag && (!s.restored || *lostRestoredFlag) && !s.wiping())
		}
	case r < 69:
		n := pick(s.rng, s.nodes)
		n.skew = pick(s.rng, []time.Duration{0, 3 * time.Second, -3 * time.Second, nodeTTL / 2, -nodeTTL / 2, nodeTTL + 5*time.Second, -(nodeTTL + 5*time.Second)})
		s.logf("%s's clock skew %v", n.name, n.skew)
	case r < 73:
		if s.wiping() {
			return
		}
		s.backup = s.st.snapshot()
		s.logf("store backed up")
	case r < 74:
		if s.backup != nil && !s.wiping() && (s.allPassed() || *restoreCrashFlag) && (!s.losing() || *lostRestoredFlag) {
			s.st.restore(s.backup)
			s.restoredStore()
			s.logf("store restored from its backup")
		}
	case r < 76:
		in := pick(s.rng, s.ings)
		in.node = s.rng.IntN(len(s.nodes))
		s.logf("%s polls %s now", in.name, s.nodes[in.node].name)
	case r < 78:
		s.wipeEvent()
	case r < 84:
		s.pathsWrite()
	case r < 85:
		s.rawClaim()
	case r < 91:
		s.pathsWrite()
	}
}

// restoredStore: the store is not the one the nodes served any more (a backup put back,
// or a wiped store remounted over what was written to it); every node refuses it until
// settle adopts it, as the operator would.
func (s *sim) restoredStore() {
	s.restored = true
	clear(s.m.required)  // serials restart below what was served: the operator's adopt decides
	clear(s.m.oldTokens) // an incarnation the backup holds is back, with its tokens
	clear(s.m.orphan)    // and its instances
	// What the model knows of applications and claims is not the store's any more
	// (a node that lost its state dir accepts the restored store and writes to it:
	// seed 165 of 101-220 claimed a host the backup had free).
	for app := range s.m.apps {
		s.m.unsureApps[app] = true
	}
	for _, h := range claimHosts {
		s.m.unsureClaims[h] = true
	}
}

// tickNodes restarts the nodes due back, then runs each live node's heartbeat (when due
// on its clock) and a reconcile pass, in a random order.
func (s *sim) tickNodes() {
	for _, n := range s.nodes {
		if n.srv == nil && s.step >= n.downUntil {
			s.start(n)
			s.logf("%s restarts", n.name)
		}
	}
	ctx := context.Background()
	for _, i := range s.rng.Perm(len(s.nodes)) {
		n := s.nodes[i]
		if n.srv == nil {
			continue
		}
		now := s.clock(n)
		if !s.settling && s.wipeOn != n && s.rng.IntN(10) < 3 {
			continue // its tick falls in the next step
		}
		if !now.Before(n.nextBeat) {
			n.step.Heartbeat(ctx, now)
			n.nextBeat = now.Add(heartbeat)
		}
		var before []byte
		faulty := s.step < s.outageUntil || s.step < n.failUntil
		if faulty {
			before = s.served(n)
		}
		keep := n.wipeRev
		s.inPass, s.listed = n, false
		err := n.step.Reconcile(ctx, now, s.settling || s.rng.IntN(8) == 0 || s.wipeOn == n)
		s.inPass = nil
		n.passed = n.passed || err == nil
		if keep != "" {
			// A wiped store is an outage: no pass derives from it, and a restart serves
			// what its state dir remembers (never adopts it).
			if rev := s.servedRev(n); rev != keep && (rev != "" || n.served200) {
				s.fail("%s serves revision %q after a pass over the wiped store, %q before the wipe (err %v)", n.name, rev, keep, err)
			}
		}
		if err != nil && faulty {
			// A restart that finds the store foreign serves what its state dir remembers:
			// from nothing served, its first document.
			if after := s.served(n); before != nil && !bytes.Equal(before, after) {
				s.fail("%s's pass failed (%v) and what it serves changed", n.name, err)
			}
		}
	}
	if s.wipeOn != nil { // its pass did not reach the listing: the wipe lands now
		s.wipe(nil)
	}
}

// pollIngresses has every ingress poll its node, apply and report.
func (s *sim) pollIngresses() {
	for _, in := range s.ings {
		n := s.nodes[in.node]
		if n.srv == nil {
			continue
		}
		hdr := map[string]string{api.HeaderIngress: in.name, api.HeaderIngressKind: api.KindPlugin}
		if in.revision != "" {
			hdr[api.HeaderAppliedSerial] = strconv.FormatUint(in.serial, 10)
			hdr[api.HeaderAppliedEpoch] = in.epoch
			hdr[api.HeaderAppliedRevision] = in.revision
		}
		rec := s.do(n, http.MethodGet, api.PathIngress+api.FormatRoutes, ingressToken, nil, hdr)
		s.checkPoll(n, rec)
		if rec.Code != http.StatusOK {
			continue
		}
		serial, _ := strconv.ParseUint(rec.Header().Get(api.HeaderSerial), 10, 64)
		epoch := rec.Header().Get(api.HeaderEpoch)
		if in.revision != "" && epoch == in.epoch && serial < in.serial {
			continue // older than what it holds: kept (the plugin's rule)
		}
		in.serial, in.epoch, in.revision, in.doc = serial, epoch, rec.Header().Get(api.HeaderRevision), rec.Body.Bytes()
	}
}

// settle ends every fault, brings every node back and runs the fleet until it
// converged: then every node serves the same bytes, and the document is the model's.
func (s *sim) settle() {
	s.logf("settle")
	s.outageUntil = 0
	s.wipeOn = nil
	if s.wiped != nil {
		s.remount()
	}
	for _, n := range s.nodes {
		n.failUntil, n.skew, n.recordFails = 0, 0, 0
		if n.srv == nil {
			n.downUntil = s.step
		}
	}
	if s.restored {
		// The operator accepts the restored store on every node (scafo-node store adopt):
		// what it holds is the fleet's now, serials below what was served included. A
		// request to a node that has not seen the store go back yet is dropped, so they
		// pass once first.
		s.now = s.now.Add(time.Second)
		s.settling = true // no tick skipped
		s.tickNodes()
		for _, n := range s.nodes {
			if err := node.RequestStoreAdopt(n.cfg.StateDir); err != nil {
				s.t.Fatal(err)
			}
		}
		for app := range s.m.apps {
			s.m.unsureApps[app] = true
		}
		for i := range apps {
			s.m.unsureApps[appName(i)] = true
		}
		for _, h := range claimHosts {
			s.m.unsureClaims[h] = true
		}
		// An application the backup brings back with its incarnation owns again the
		// instances its delete left to a sweep that has not run: what each node holds.
		for _, n := range s.nodes {
			for i := range apps {
				s.m.unsureInsts[instKey{n.name, appName(i)}] = true
			}
		}
		s.restored = false
	}
	s.settling = true
	for range 3 {
		s.now = s.now.Add(time.Second)
		for _, n := range s.nodes {
			n.nextBeat = s.now // every record rewritten
		}
		s.tickNodes()
	}
	s.settling = false
	s.resolve()
	s.pollIngresses()
	if s.failed {
		return
	}
	s.checkConverged()
	if !s.failed && s.rng.IntN(4) == 0 {
		s.staleFleet()
	}
}

// staleFleet: the settled fleet's clocks jump past reconcile.nodeTTL while no node
// record can be written (a heartbeat fails): every node sees every record, its own
// included, stale. Fail static keeps every upstream (docs/design.md §15): the fleet
// serves what it did, the model's document. Then the clocks come back and the records
// are written again.
func (s *sim) staleFleet() {
	jump := nodeTTL + 5*time.Second
	s.logf("every clock jumps %v ahead and no node record can be written", jump)
	s.recordsFail, s.settling = true, true
	for _, n := range s.nodes {
		n.skew = jump
	}
	for range 2 {
		s.now = s.now.Add(time.Second)
		s.tickNodes()
	}
	s.settling = false
	s.pollIngresses()
	s.checkConverged()
	s.recordsFail = false
	for _, n := range s.nodes {
		n.skew, n.nextBeat = 0, s.now
	}
	s.logf("the clocks are back; records written again")
}

// docOf decodes a served document.
func docOf(b []byte) (routing.Document, error) {
	var d routing.Document
	err := json.Unmarshal(b, &d)
	return d, err
}

// docCache decodes each served document once: a fleet serves the same bytes on every
// node and at every poll until its routing changes, and under -race decoding them at
// each poll was a tenth of the simulator's time. An entry is found by the bytes
// themselves (a map keyed by the body), so a document is never taken for another;
// what is read from it is read-only. Bounded: emptied when full.
type docCache map[string]cachedDoc

type cachedDoc struct {
	d   routing.Document
	err error
}

const docCacheSize = 64

func (c *docCache) doc(b []byte) (routing.Document, error) {
	if e, ok := (*c)[string(b)]; ok {
		return e.d, e.err
	}
	if *c == nil || len(*c) >= docCacheSize {
		*c = make(docCache, docCacheSize)
	}
	d, err := docOf(b)
	(*c)[string(b)] = cachedDoc{d, err}
	return d, err
}

func hostsOf(d routing.Document) []string {
	var hs []string
	for _, r := range d.Routes {
		hs = append(hs, r.Host+"="+r.Application)
	}
	slices.Sort(hs)
	return hs
}

// served is what n serves now (nil: no document).
func (s *sim) served(n *simNode) []byte {
	rec := s.do(n, http.MethodGet, api.PathIngress+api.FormatRoutes, ingressToken, nil, nil)
	if rec.Code != http.StatusOK {
		return nil
	}
	return rec.Body.Bytes()
}
