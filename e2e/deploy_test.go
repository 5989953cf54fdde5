package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/listengate"
)

// Deploys and deaths lose nothing (docs/design.md §13, issue 24): through a real Traefik on the
// shipped configuration (the HTTP provider, and the provider plugin), under steady load,
// 20 deploys by a move to the other port of the application's pair (with ?wait=applied,
// then a drain), 20 in-place restarts, 20 in-place restarts with the listening socket held
// across them (systemd socket activation), and the death of every primary instance of ten
// applications at once. Every POST carries an id; the application counts deliveries, so
// a request delivered twice (a retried POST) fails the test as surely as a 502.

// deployCounts are the application's deliveries, by request id, across its releases.
type deployCounts struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *deployCounts) seen(id string) {
	c.mu.Lock()
	c.got[id]++
	c.mu.Unlock()
}

func (c *deployCounts) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[id]
}

// release is one running release of an application: a process listening on one port,
// answering like the echo upstreams (its name in a JSON body), counting POST deliveries.
type release struct {
	name   string
	addr   string
	counts *deployCounts
	held   *heldSocket // nil: each start listens anew on addr
	mu     sync.Mutex
	srv    *serving
}

// serving is one release's server, with what its graceful stop needs.
type serving struct {
	*http.Server
	ln     net.Listener
	own    bool          // ln is this release's own socket (not a held one): gate it on stop
	served chan struct{} // closed when Serve returned
	lame   atomic.Bool   // the lame duck: answers carry Connection: close
	mu     sync.Mutex
	idle   map[net.Conn]bool // connections waiting for a request (new or idle)
}

func (s *serving) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == http.StateNew || st == http.StateIdle {
		s.idle[c] = true
	} else {
		delete(s.idle, c)
	}
}

func (s *serving) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle)
}

// stop is a graceful stop that loses nothing it accepted (net/http's Shutdown alone drops
// a request read after it began on a connection that had not sent one yet, and closes
// idle keep-alive connections under a client that may be writing on them):
//  1. the lame duck: for lameDuck every answer carries Connection: close, so clients stop
//     reusing their keep-alive connections (each closes after its next answer; an idle
//     pool hands out its connections before dialing);
//  2. on its own socket, gate and drain it (listengate.Drain, up to a second, while Serve
//     still accepts): new connection attempts are dropped (the client sends its SYN
//     again about a second later, to the next release or to a refusal Traefik retries)
//     and the accept queue empties, so closing the socket resets no connection Traefik
//     already wrote a request on. Never on a held socket: it stays open, and what queues
//     on it is for the next release;
//  3. stop accepting: close the listener (on a held socket, only this release's dup:
//     connections keep queuing in the backlog for the next release) and wait for Serve to
//     return, so every accepted connection is tracked;
//  4. wait (up to a second) until no accepted connection still waits for a request;
//  5. Shutdown: finish what is in flight.
func (s *serving) stop() {
	s.lame.Store(true)
	time.Sleep(lameDuck)
	if s.own {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = listengate.Drain(ctx, s.ln) // on failure, closing resets what still queues, as without it
		cancel()
	}
	_ = s.ln.Close()
	<-s.served
	_ = poll(time.Second, 5*time.Millisecond, func() error {
		if n := s.waiting(); n > 0 {
			return fmt.Errorf("%d connections wait for a request", n)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// heldSocket is what systemd socket activation does for an application: it owns the
// listening socket of the application's port across the releases that serve it. Each
// release serves on a dup of it (as a socket-activated process gets fd 3), and its
// Shutdown closes only that dup: the socket itself never closes, so the kernel keeps
// completing handshakes into its backlog while no release serves, and the next release
// accepts them. Nothing refuses, nothing is reset.
type heldSocket struct{ ln *net.TCPListener }

func holdSocket(t *testing.T, addr string) *heldSocket {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("holding a socket on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return &heldSocket{ln: ln.(*net.TCPListener)}
}

// dup is a listener on a new descriptor of the held socket (the holder never accepts).
func (h *heldSocket) dup(t *testing.T) net.Listener {
	t.Helper()
	f, err := h.ln.File()
	if err != nil {
		t.Fatalf("dup of the held socket: %v", err)
	}
	defer f.Close() // FileListener dups it again
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatalf("listener on the held socket: %v", err)
	}
	return ln
}

// startHeldRelease starts a release serving on a dup of held (see heldSocket).
func startHeldRelease(t *testing.T, name string, held *heldSocket, counts *deployCounts) *release {
	t.Helper()
	r := &release{name: name, addr: held.ln.Addr().String(), counts: counts, held: held}
	r.start(t)
	t.Cleanup(r.kill)
	return r
}

func startRelease(t *testing.T, name, addr string, counts *deployCounts) *release {
	t.Helper()
	r := &release{name: name, addr: addr, counts: counts}
	r.start(t)
	t.Cleanup(r.kill)
	return r
}

func (r *release) start(t *testing.T) {
	t.Helper()
	var ln net.Listener
	if r.held != nil {
		ln = r.held.dup(t)
	} else if err := poll(5*time.Second, 20*time.Millisecond, func() error {
		var err error
		ln, err = listengate.Listen("tcp", r.addr)
		return err
	}); err != nil {
		t.Fatalf("release %s: listening on %s: %v", r.name, r.addr, err)
	}
	srv := &serving{ln: ln, own: r.held == nil, served: make(chan struct{}), idle: map[net.Conn]bool{}}
	srv.Server = &http.Server{ReadHeaderTimeout: 5 * time.Second, ConnState: srv.connState, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if srv.lame.Load() {
			w.Header().Set("Connection", "close")
		}
		if req.Method == http.MethodPost {
			r.counts.seen(req.Header.Get("X-Scafo-Test-Id"))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoReply{Name: r.name, Path: req.URL.Path, RawPath: req.RequestURI, Host: req.Host})
	})}
	go func() { _ = srv.Serve(ln); close(srv.served) }()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

// kill closes the listener and every connection at once: a process that died.
func (r *release) kill() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// stop stops a release gracefully at once: it stops accepting (the port refuses) and
// lets the requests in flight finish, as a process does on SIGTERM.
func (r *release) stop() { r.drain(0) }

// drain stops a release as a deploy does: it keeps serving for grace (an ingress that
// fetched the new configuration is still applying it), then stops accepting and lets
// the requests in flight finish.
func (r *release) drain(grace time.Duration) {
	time.Sleep(grace)
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		// Without the lame duck and the wait (serving.stop), a request Traefik writes
		// on a connection as Shutdown closes or drops it is lost: its headers were
		// written, and Traefik rightly never retries it. Measured on a held socket, 20
		// restarts: 31 of 14 585 failed with srv.SetKeepAlivesEnabled(false) for the
		// lame duck (it closes every idle connection at once), 12 of 14 331 with the
		// lame duck and a bare Shutdown after it.
		srv.stop()
	}
}

// lameDuck is how long a stopping release answers with keep-alives off before it closes.
const lameDuck = 200 * time.Millisecond

// shot is one request of the load.
type shot struct {
	at      time.Time
	took    time.Duration
	host    string
	method  string
	id      string
	status  int
	err     string
	from    string
	phase   string
	retried bool // sent while the phase's disturbance was on
}

// load sends GETs and POSTs (alternately) to hosts through a Traefik from workers
// concurrent clients, each one request at a time, until stopped.
type load struct {
	mu      sync.Mutex
	shots   []shot
	phase   string
	unquiet atomic.Bool
	stop    func()
}

// shotSeq numbers every request of every load (ids are unique across loads).
var shotSeq atomic.Int64

func startLoad(t *testing.T, tr *traefik, hosts []string, n int) *load {
	t.Helper()
	l := &load{phase: "calm"}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	l.stop = workers(t, n, func(w, i int) {
		host := hosts[(w+i)%len(hosts)]
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodPost
		}
		id := strconv.FormatInt(shotSeq.Add(1), 10)
		req, _ := http.NewRequest(method, "http://"+tr.webAddr()+"/deploy", strings.NewReader("x"))
		req.Host = host
		req.Header.Set("X-Scafo-Test-Id", id)
		l.mu.Lock()
		phase := l.phase
		l.mu.Unlock()
		s := shot{at: time.Now(), host: host, method: method, id: id, phase: phase, retried: l.unquiet.Load()}
		resp, err := client.Do(req)
		s.took = time.Since(s.at)
		if err != nil {
			s.err = err.Error()
		} else {
			r, rerr := readResponse(resp)
			resp.Body.Close()
			s.status = r.status
			if rerr != nil {
				s.err = rerr.Error()
			}
			if r.echo != nil {
				s.from = r.echo.Name
			}
		}
		l.mu.Lock()
		l.shots = append(l.shots, s)
		l.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	})
	return l
}

func (l *load) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

func (l *load) of(phase string) []shot {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []shot
	for _, s := range l.shots {
		if s.phase == phase {
			out = append(out, s)
		}
	}
	return out
}

func (s shot) failed() bool { return s.err != "" || s.status != http.StatusOK || s.from == "" }

// shotPercentile is the p-th percentile of the durations of shots (p in 0..100).
func shotPercentile(shots []shot, p int) time.Duration {
	if len(shots) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(shots))
	for i, s := range shots {
		ds[i] = s.took
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

// instancePair allocates (or reads) app's port pair on n.
func (n *node) instancePair(t *testing.T, app string) (port int, pair [2]int) {
	t.Helper()
	var got struct {
		Port  int    `json:"port"`
		Ports [2]int `json:"ports"`
	}
	n.call(t, http.MethodPost, "/v1/node/instances/"+app, map[string]any{}, &got)
	if got.Ports[0] == 0 || got.Ports[1] == 0 || got.Ports[0] == got.Ports[1] || (got.Port != got.Ports[0] && got.Port != got.Ports[1]) {
		t.Fatalf("allocating %s on %s: port %d, pair %v: want a pair holding the port", app, n.name, got.Port, got.Ports)
	}
	return got.Port, got.Ports
}

// moveAndWait moves app's instance on n to port and waits until every live ingress
// applied it (?wait=applied); anything but 200 fails the test.
func (n *node) moveAndWait(t *testing.T, app string, port int) time.Duration {
	t.Helper()
	start := time.Now()
	status, b := n.do(t, http.MethodPut, "/v1/node/instances/"+app+"?wait=applied&timeout=30s", map[string]any{"port": port, "ready": true}, testAdminToken)
	if status != http.StatusOK || !strings.Contains(string(b), `"applied":true`) {
		t.Fatalf("moving %s to port %d on %s: %d %s, want 200 applied", app, port, n.name, status, b)
	}
	return time.Since(start)
}

// deathNotice bounds the moment after a process dies in which Traefik can still write
// a request on a keep-alive connection the process held: its transport learns of the
// close from that connection's read loop, a goroutine, so on a loaded machine a request
// may pick the connection after the kill (observed: 1–2 requests of ~3 600, within ms
// of it, in 4 of 6 runs at load; POSTs, and once a GET, which Go's transport retries
// only once and can retry onto another of the dying process's idle connections). Such
// a request is lost like one in flight: its headers went out, so no proxy may send it
// again (Traefik's retry stops at WroteHeaders, pkg/middlewares/retry).
const deathNotice = 250 * time.Millisecond

// writtenToTheDead reports a request answered 502 that began within deathNotice of the
// kill: one Traefik wrote on a dying process's connection.
func writtenToTheDead(s shot, killed time.Time) bool {
	return s.status == http.StatusBadGateway && s.at.Before(killed.Add(deathNotice))
}

// racedTheFailover reports a request answered 503 by Traefik itself that began while a
// killed primary was still in Traefik's configuration (before dropped). Traefik's
// failover reads its main's status, then calls it (pkg/server/service/loadbalancer/
// failover, ServeHTTP): a request that read "up" just before the passive check took the
// main's only server out reaches a load balancer with no server left, which answers 503
// "no available server", and the retry middleware does not retry an answer. The race is
// open at the kill and again at every reload until the node's republish (the dead
// instance out) reaches Traefik: a reload builds new load balancers whose passive checks
// start "up", and the node's probe can take the ten instances out over two rounds, so two
// republishes. Seen once in ~3 600 deaths-phase requests (a clean-clone run, 2026-12-04,
// within 250 ms of the kill) and once more (CI, 2026-12-07, 07:21:11.609; the kill time
// was not logged). It is Traefik's to fix, and it is counted, not hidden: at most one per
// killed primary may be answered so, and only before dropped (a failover that never
// switched would answer every later request 503 and fail the phase). dropped is measured
// by a watch started at the kill (watchNoServerOn), not after the test's own waits, so a
// slower switch does not widen its own allowance; and the cap is one per host.
func racedTheFailover(s shot, dropped time.Time) bool {
	return s.status == http.StatusServiceUnavailable && s.from == "" && s.at.Before(dropped)
}

type deployRow struct {
	provider, phase string
	requests        int
	failed          int
	inFlight        int // failed requests in flight on a process as it died, or written to its connections (no proxy can save them)
	duplicates      int
	p50, p99        time.Duration
	failures        []string
}

func TestDeploysAndDeathsLoseNothing(t *testing.T) {
	var rows []deployRow
	for _, provider := range []string{"http", "plugin"} {
		t.Run(provider, func(t *testing.T) { rows = append(rows, testDeploysAndDeaths(t, provider)...) })
	}
	lines := []string{
		"One or two nodes, one Traefik v3.6.12 on the shipped configuration (HTTP provider at 1 s, or the plugin), " +
			"4 clients sending GET and POST alternately as fast as answers come; every POST carries an id the application counts.",
		"",
		"| provider | what happened | requests | failed | in flight on a dying process (or written to its connection) | POSTs not delivered exactly once | p50 | p99 |",
		"|---|---|---:|---:|---:|---:|---:|---:|",
	}
	for _, r := range rows {
		lines = append(lines, fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %s | %s |", r.provider, r.phase, r.requests, r.failed, r.inFlight, r.duplicates, ms(r.p50), ms(r.p99)))
	}
	results.add("Scenario 24: deploys and deaths", lines...)
}

func testDeploysAndDeaths(t *testing.T, provider string) []deployRow {
	const (
		deploys  = 20
		restarts = 20
		down     = 700 * time.Millisecond // an in-place restart: the port refuses for this long
		grace    = time.Second            // a deploy's drain: the old release serves this long after applied
	)
	f := startFleet(t, 2, nodeOptions{})
	n1, n2 := f.nodes[0], f.nodes[1]
	var tr *traefik
	if provider == "http" {
		tr = startTraefik(t, "traefik-"+provider, traefikOptions{node: n1})
	} else {
		tr = startPluginTraefik(t, "traefik-"+provider, pluginTraefikOptions{endpoints: []*node{n1, n2}, prefer: n1.name})
	}
	counts := &deployCounts{got: map[string]int{}}

	// shop: one placement, on n1.
	n1.putApp(t, appSpec{Name: "shop", Account: "acme", Placement: []string{n1.name}})
	port, pair := n1.instancePair(t, "shop")
	cur := startRelease(t, "shop@r0", hostPort(n1.ip, port), counts)
	n1.setInstance(t, "shop", port, true)
	// ten two-placement applications, primaries on n1.
	var hosts []string
	primaries := map[string]*release{}
	for i := range 10 {
		app := fmt.Sprintf("d%d", i)
		n1.putApp(t, appSpec{Name: app, Account: "acme", Placement: []string{n1.name, n2.name}})
		for _, n := range []*node{n1, n2} {
			p, _ := n.instancePair(t, app)
			r := startRelease(t, app+"@"+n.name, hostPort(n.ip, p), counts)
			n.setInstance(t, app, p, true)
			if n == n1 {
				primaries[app] = r
			}
		}
		hosts = append(hosts, app+".apps.localhost")
	}
	// inplace: one placement on n1, restarted in place on a listening socket held across
	// its releases (heldSocket), as systemd socket activation holds it.
	n1.putApp(t, appSpec{Name: "inplace", Account: "acme", Placement: []string{n1.name}})
	hport, _ := n1.instancePair(t, "inplace")
	held := startHeldRelease(t, "inplace@r0", holdSocket(t, hostPort(n1.ip, hport)), counts)
	n1.setInstance(t, "inplace", hport, true)
	const shopHost, heldHost = "shop.apps.localhost", "inplace.apps.localhost"
	tr.waitServedBy(t, shopHost, "/", "shop@r0", routeTimeout)
	tr.waitServedBy(t, heldHost, "/", "inplace@r0", routeTimeout)
	for i := range 10 {
		tr.waitServedBy(t, hosts[i], "/", fmt.Sprintf("d%d@n1", i), routeTimeout)
	}

	ld := startLoad(t, tr, []string{shopHost}, 4)
	time.Sleep(2 * time.Second) // a calm baseline
	ld.setPhase("deploys")
	var applied []time.Duration
	for i := 1; i <= deploys; i++ {
		next := pair[0]
		if port == pair[0] {
			next = pair[1]
		}
		nr := startRelease(t, fmt.Sprintf("shop@r%d", i), hostPort(n1.ip, next), counts)
		ld.unquiet.Store(true)
		applied = append(applied, n1.moveAndWait(t, "shop", next))
		cur.drain(grace)
		ld.unquiet.Store(false)
		cur, port = nr, next
	}
	ld.setPhase("restarts")
	time.Sleep(200 * time.Millisecond) // the deploys' last requests are answered first
	for range restarts {
		ld.unquiet.Store(true)
		cur.stop()
		time.Sleep(down)
		cur.start(t)
		ld.unquiet.Store(false)
		// Up for longer than two probe intervals: the node's probe (1 s, down after 2
		// failures in a row) never sees the restart twice, so the instance stays in
		// the document and the retries carry the requests across. (Restarts every
		// second would be flapping, which the node damps by taking the instance out.)
		time.Sleep(1500 * time.Millisecond)
	}
	ld.stop()

	// The same in-place restarts, the listening socket held across them: each release
	// stops gracefully (lame duck, then Shutdown closes its dup of the socket), nothing
	// serves for the same window, and the next release accepts what queued meanwhile.
	// Up for less time than the plain restarts: the node's TCP probe is answered by the
	// kernel on the held socket, so it never sees a restart (no flapping to stay under).
	ld3 := startLoad(t, tr, []string{heldHost}, 4)
	ld3.setPhase("held")
	time.Sleep(500 * time.Millisecond) // the clients' keep-alive connections are up
	for range restarts {
		ld3.unquiet.Store(true)
		held.stop()
		time.Sleep(down)
		held.start(t)
		ld3.unquiet.Store(false)
		time.Sleep(500 * time.Millisecond)
	}
	ld3.stop()

	// The deaths: load over the ten applications, then every primary dies at once.
	ld2 := startLoad(t, tr, hosts, 4)
	time.Sleep(time.Second)
	var dead []string
	for _, r := range primaries {
		dead = append(dead, r.addr)
	}
	on, err := tr.serversOn(dead)
	for _, a := range dead {
		if err == nil && !slices.ContainsFunc(on, func(s string) bool { return strings.HasSuffix(s, " → "+a) }) {
			err = fmt.Errorf("no server on %s", a)
		}
	}
	if err != nil {
		t.Fatalf("%s's configuration before the deaths: servers on the primaries %v: %v; want every primary", tr.name, on, err)
	}
	ld2.setPhase("deaths")
	ld2.unquiet.Store(true)
	killedAt := time.Now()
	for _, r := range primaries {
		r.kill()
	}
	killed := time.Now()
	droppedc := tr.watchNoServerOn(dead)
	for i := range 10 {
		tr.waitServedBy(t, hosts[i], "/", fmt.Sprintf("d%d@n2", i), routeTimeout)
	}
	var dropped time.Time
	select {
	case dropped = <-droppedc:
	case <-time.After(routeTimeout):
		t.Fatalf("%s's configuration still has a server on a killed primary %s after the kill", tr.name, routeTimeout)
	}
	t.Logf("%s: primaries killed at %s (in %s); Traefik's configuration had none of them %s after",
		provider, killedAt.Format("15:04:05.000"), ms(killed.Sub(killedAt)), ms(dropped.Sub(killedAt)))
	time.Sleep(3 * time.Second) // the probes, the republish and Traefik's reload settle under load
	ld2.stop()

	slices.Sort(applied)
	t.Logf("%s: deploys answered applied in p50 %s, max %s", provider, ms(applied[len(applied)/2]), ms(applied[len(applied)-1]))
	var rows []deployRow
	phases := []struct {
		l          *load
		phase, say string
	}{
		{ld, "calm", "undisturbed"},
		{ld, "deploys", fmt.Sprintf("%d deploys by a move within the port pair (wait=applied, %s drain)", deploys, grace)},
		{ld, "restarts", fmt.Sprintf("%d in-place restarts (the port refuses for %s)", restarts, down)},
		{ld3, "held", fmt.Sprintf("%d in-place restarts, listening socket held (nothing serves for %s)", restarts, down)},
		{ld2, "deaths", "every primary of 10 two-placement applications killed at once"},
	}
	for _, ph := range phases {
		shots := ph.l.of(ph.phase)
		row := deployRow{provider: provider, phase: ph.say, requests: len(shots)}
		var ok []shot
		racedOn := map[string]bool{} // hosts with a 503 excused by racedTheFailover
		for _, s := range shots {
			if s.failed() && ph.phase == "deaths" && (s.at.Before(killed) && s.at.Add(s.took).After(killedAt) || writtenToTheDead(s, killed)) {
				row.inFlight++
			} else if s.failed() && ph.phase == "deaths" && racedTheFailover(s, dropped) && !racedOn[s.host] {
				racedOn[s.host] = true
				row.inFlight++
				t.Logf("%s, %s: %s %s to %s at %s (%s after the kill) answered 503 by Traefik's failover as its main went down (racedTheFailover)",
					provider, ph.say, s.method, s.id, s.host, s.at.Format("15:04:05.000"), ms(s.at.Sub(killedAt)))
			} else if s.failed() {
				row.failed++
				if len(row.failures) < 5 {
					row.failures = append(row.failures, fmt.Sprintf("%s %s at %s: %d %s", s.method, s.id, s.at.Format("15:04:05.000"), s.status, s.err))
				}
			} else {
				ok = append(ok, s)
			}
			if s.method == http.MethodPost {
				n := counts.of(s.id)
				if n > 1 || (n == 0 && !s.failed()) {
					row.duplicates++
				}
			}
		}
		row.p50, row.p99 = shotPercentile(ok, 50), shotPercentile(ok, 99)
		var disturbed []shot // answered requests sent while the disturbance was on
		for _, s := range ok {
			if s.retried {
				disturbed = append(disturbed, s)
			}
		}
		t.Logf("%s, %s: %d requests, %d failed %v, %d in flight on a dying process or written to its connections, %d POSTs delivered twice (or answered and never delivered), latency p50 %s p99 %s; the %d sent while disturbed: p50 %s p99 %s max %s",
			provider, ph.say, row.requests, row.failed, row.failures, row.inFlight, row.duplicates, ms(row.p50), ms(row.p99),
			len(disturbed), ms(shotPercentile(disturbed, 50)), ms(shotPercentile(disturbed, 99)), ms(shotPercentile(disturbed, 100)))
		if row.requests < 50 {
			t.Errorf("%s, %s: %d requests: the load did not run", provider, ph.say, row.requests)
		}
		// No phase loses a request. An in-place restart closes a listening socket under
		// load, which resets the connections the kernel had completed into its accept
		// queue, after Traefik wrote the request (it rightly never resends one): so a
		// release gates and drains its own socket before closing it (serving.stop), and
		// a connection attempt meanwhile is dropped, retried by its SYN about a second
		// later and served or refused (the retries carry a refusal), never reset.
		// Measured 2026-12-03, 20 restarts: 0 failed of 32 000–39 500 per provider in
		// each of 4 runs (one beside two CPU hogs), the requests sent during a restart at
		// p99 1.01–1.02 s (the SYN retransmit; 0.79–0.92 s with refusals alone); without
		// the gate, control runs lost 1 and 0 (quiet), 1 and 2 (beside the hogs): 502s.
		// On a held socket nothing closes: nothing is refused, nothing reset.
		if row.failed > 0 {
			t.Errorf("%s, %s: %d failed requests (%v), want none", provider, ph.say, row.failed, row.failures)
		}
		if row.duplicates != 0 {
			t.Errorf("%s, %s: %d POSTs delivered other than once, want every POST exactly once", provider, ph.say, row.duplicates)
		}
		rows = append(rows, row)
	}
	return rows
}
