// Package probe is the prober: this node checks its own instances every probe.interval, and the readiness
// it publishes in its record (nodes/<node>.json) is the instance's declared readiness
// AND the probe's verdict. A change of that verdict rewrites the record at once (a named
// serial bump, node/self), so within one reconcile tick every node derives a document
// without a dead upstream, and a Traefik reload (which resets its health state) can no
// longer send traffic back to it.
//
// Choices, written down (README "Instance probes"):
//
//   - What is probed: node.address:port, the very address the document publishes and
//     every Traefik dials (node.address is an IP, set by the operator, never by a
//     tenant). Only that IP is ever dialled: the HTTP client's dialler refuses any other
//     address, redirects are never followed (3xx is "up", like Traefik's own check), no
//     proxy from the environment is used, no credential is sent, response headers are
//     bounded and the body is never read.
//   - How: a TCP connect (closed with RST: no TIME_WAIT per probe), or an HTTP GET of the
//     application's health.path (admin-set) when it declares one: 2xx/3xx is up.
//   - Hysteresis: probe.downAfter (2) consecutive failures mark an instance down,
//     probe.upAfter (2) consecutive successes mark it up again. At a 1 s interval a dead
//     instance is out of this node's record 1–2 s after it dies (plus the probe timeout
//     when it hangs rather than refuses), while one lost SYN or one slow answer flaps
//     nothing fleet-wide.
//   - Flap damping (like BGP route-flap damping): a tenant opening and closing its port
//     would otherwise rewrite this node's record and bump the serial (a re-render and
//     a reload of every Traefik in the fleet) every couple of seconds, past the write
//     rate limit and the audit log. A recovery (down to up) that makes probe.flapUps (3)
//     recoveries within probe.flapWindow (60 s), or that comes while the instance still
//     carries a hold-down penalty, is held down: not published up for probe.holdDown
//     (10 s), doubled for every further recovery up to probe.holdDownMax (5 min); the
//     penalty halves for every flapWindow without a recovery and is forgotten below
//     holdDown. Going down is never delayed (a dead instance never stays in the
//     document), and a lone death and recovery is published up after upAfter successes
//     as before.
//   - A new instance (or a new incarnation, or a node restart) starts up: the
//     declaration is trusted until probes say otherwise, so a node restart never
//     withdraws every instance for a round.
//   - Damping belongs to the application's instance on this node (its incarnation),
//     whatever its port or declared readiness (issue 25 item 3): a deploy alternates
//     between the two ports of the pair, and a tenant alternating ports must not reset
//     its flap history. A port change (or the instance set again after a release,
//     within the damping's memory, which keeps an instance down when released for
//     probe.flapWindow) keeps the recoveries and the hold-down; the new port is
//     probed afresh (its consecutive counts start at 0) and starts from the
//     instance's verdict: up stays up (trusted, as a deploy needs), and a down
//     instance put on a new port is a recovery, subject to damping like one found by
//     the probes (trusted up unless that makes it a flap, held down otherwise). The
//     change is taken at its first sight (a round, or the record's publication), so
//     the record and the prober never disagree.
//   - Bounded: at most probe.concurrency probes in flight, each bounded by probe.timeout
//     (≤ interval). An instance whose probe is still running at the next tick is skipped
//     for that tick (counted), so a slow or hanging instance never delays the others.
//   - Refused outright (down, never dialled): an instance on the node's API port (only
//     the admin can set one; through an application's hostname it would expose the
//     node API without the apex's denied paths), and two instances on one port (the
//     registry forbids it; a hand-edited instances.json could not).
//   - /v1/health/instances/{app} (anonymous: Traefik's node-delegated check) answers from
//     the prober's last verdict and never dials, so hammering it costs a map lookup.
package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/render/fleet"
)

// probeState is what the prober knows of one instance.
type probeState struct {
	target   probeTarget
	up       bool
	fails    int // consecutive failures
	oks      int // consecutive successes
	probes   int // probes of this target
	last     time.Time
	lastErr  string
	lastDur  time.Duration
	since    time.Time // when up last changed (or the target was set)
	inflight bool
	// slow: the last probe timed out; the next goes through the slow lane.
	slow bool
	// Flap damping: recoveries are the times the probes brought the instance back
	// (upAfter successes after being down) within flapWindow; penalty is the current
	// hold-down (0: none), heldUntil when the one in force ends.
	recoveries []time.Time
	penalty    time.Duration
	heldUntil  time.Time
	// counted: the recovery of this down spell was already counted (a port change
	// held down); the probes' own run of successes does not count it again.
	counted bool
	// released: when the instance was released (zero while it is set). A state down
	// when released is kept (gone) for probe.flapWindow from then, as a recovery
	// would be: setting it again is a recovery, damped like any other.
	released time.Time
}

// heldLocked reports whether st is held down at now (caller holds mu).
func (st *probeState) heldLocked(now time.Time) bool {
	return !st.up && now.Before(st.heldUntil)
}

// probeTarget is what is probed: app's instance on port, over TCP or GET path.
type probeTarget struct {
	app, appID string
	port       int
	path       string // "" → TCP connect
}

func (t probeTarget) kind() string {
	if t.path == "" {
		return "tcp"
	}
	return "http"
}

// probeMetrics are the prober's Prometheus metrics.
type probeMetrics struct {
	results     *prometheus.CounterVec // kind, result
	transitions *prometheus.CounterVec // to
	skipped     prometheus.Counter
	holdDowns   prometheus.Counter
	duration    *prometheus.HistogramVec // kind
}

func newProbeMetrics(reg prometheus.Registerer, down func() float64) *probeMetrics {
	m := &probeMetrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_instance_probe_results_total",
			Help: "Probes of this node's instances by kind (tcp, http) and result (up, down).",
		}, []string{"kind", "result"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scafo_instance_probe_transitions_total",
			Help: "Instances whose probe verdict changed, by the state entered (up, down).",
		}, []string{"to"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scafo_instance_probe_skipped_total",
			Help: "Probes not started because the instance's previous probe was still in flight (slow or hanging instances, or more instances than probe.concurrency can probe in one interval).",
		}),
		holdDowns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scafo_instance_probe_hold_downs_total",
			Help: "Recoveries of a flapping instance held down (not published up) by flap damping: a hold-down begun or extended.",
		}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scafo_instance_probe_duration_seconds",
			Help:    "Duration of instance probes by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"kind"}),
	}
	downGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "scafo_instance_probe_down",
		Help: "This node's instances its probes hold down (left out of its record whatever their declared readiness).",
	}, down)
	reg.MustRegister(m.results, m.transitions, m.skipped, m.holdDowns, m.duration, downGauge)
	return m
}

// Prober probes this node's instances. A nil *Prober is "probing disabled": every
// method then answers from the declaration alone.
type Prober struct {
	cfg     Config
	addr    netip.Addr
	apiPort func() int
	// instances are this node's instances (the registry); declared looks one up.
	instances func() map[string]fleet.Instance
	declared  func(app string) (fleet.Instance, bool)
	// healthPath is app's declared health path for incarnation appID ("" for none, or
	// while the application is unknown).
	healthPath func(app, appID string) string
	// onChange is called when an instance declared ready changes verdict.
	onChange func()
	log      *slog.Logger
	m        *probeMetrics

	dialer net.Dialer
	client *http.Client
	// sem bounds the probes in flight; slowSem, a quarter of the slots, is the lane of
	// instances whose last probe timed out, so hanging instances never take the slots
	// that answer the others at once.
	sem, slowSem chan struct{}

	mu     sync.Mutex
	states map[string]*probeState // by app
	// gone are the states of instances released while their damping still counts (by
	// app): the same incarnation set again takes its damping back.
	gone   map[string]*probeState
	shared map[int]bool // ports held by more than one instance (last round)
}

// Options are what a prober needs from the node.
type Options struct {
	Config Config
	// Addr is node.address: the only address ever dialled.
	Addr netip.Addr
	Log  *slog.Logger
	// APIPort is the node API's port (an instance on it is refused, never dialled).
	APIPort func() int
	// Instances are this node's instances (the registry); Declared looks one up.
	Instances func() map[string]fleet.Instance
	Declared  func(app string) (fleet.Instance, bool)
	// HealthPath is app's declared health path for incarnation appID ("" for none, or
	// while the application is unknown).
	HealthPath func(app, appID string) string
	// OnChange is called when an instance declared ready changes verdict.
	OnChange func()
	// Metrics registers the prober's metrics.
	Metrics prometheus.Registerer
}

// New builds the prober of this node's instances; it probes once Run is called.
func New(o Options) *Prober {
	p := newProber(o.Config, o.Addr, o.Log)
	p.apiPort, p.instances, p.declared = o.APIPort, o.Instances, o.Declared
	p.healthPath, p.onChange = o.HealthPath, o.OnChange
	p.m = newProbeMetrics(o.Metrics, p.down)
	return p
}

// errProbeAddress is the dialler refusing any address but the instance's own.
var errProbeAddress = errors.New("probe: refusing to dial an address other than the node's own")

func newProber(cfg Config, addr netip.Addr, log *slog.Logger) *Prober {
	p := &Prober{
		cfg:     cfg,
		addr:    addr,
		log:     log,
		sem:     make(chan struct{}, cfg.Concurrency-cfg.Concurrency/4),
		slowSem: make(chan struct{}, max(1, cfg.Concurrency/4)),
		states:  map[string]*probeState{},
		gone:    map[string]*probeState{},
	}
	p.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // never HTTP(S)_PROXY: the probe goes to the instance itself
			DialContext:            p.dialOwn,
			DisableKeepAlives:      true,
			DisableCompression:     true,
			MaxResponseHeaderBytes: 16 << 10,
			ResponseHeaderTimeout:  cfg.EffectiveTimeout(),
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p
}

// dialOwn dials only the node's own address (the HTTP client's dialler).
func (p *Prober) dialOwn(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || ap.Addr().Unmap() != p.addr.Unmap() {
		return nil, fmt.Errorf("%w: %s", errProbeAddress, address)
	}
	return p.dialer.DialContext(ctx, "tcp", address)
}

// Run probes every interval until ctx ends.
func (p *Prober) Run(ctx context.Context) {
	t := time.NewTicker(time.Duration(p.cfg.Interval))
	defer t.Stop()
	for {
		p.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round starts one probe of every instance whose previous probe has finished.
func (p *Prober) round(ctx context.Context) {
	insts := p.instances()
	shared := sharedPorts(insts)
	now := time.Now()
	type job struct {
		st   *probeState
		tgt  probeTarget
		slow bool
	}
	var jobs []job
	targets := make(map[string]probeTarget, len(insts))
	for app, inst := range insts {
		targets[app] = probeTarget{app: app, appID: inst.AppID, port: inst.Port, path: p.healthPath(app, inst.AppID)}
	}
	p.mu.Lock()
	p.shared = shared
	for app, st := range p.states {
		if _, ok := insts[app]; !ok {
			delete(p.states, app)
			st.released = now
			if p.dampedLocked(st, now) {
				p.gone[app] = st
			}
		}
	}
	for app, st := range p.gone {
		if !p.dampedLocked(st, now) {
			delete(p.gone, app)
		}
	}
	for app, inst := range insts {
		tgt := targets[app]
		st := p.stateLocked(app, inst, now)
		if st == nil || st.target.port != tgt.port || st.target.appID != tgt.appID {
			continue // this round's view is older than the registry: the next round probes
		}
		if st.target.path != tgt.path {
			// A new health path (the admin's, or the instance first seen by the
			// record's publication): keep the verdict, count afresh.
			st.target, st.fails, st.oks = tgt, 0, 0
		}
		if p.refusal(app, inst, shared) != "" {
			continue // down without a probe (verdict)
		}
		if st.inflight {
			p.m.skipped.Inc()
			continue
		}
		st.inflight = true
		jobs = append(jobs, job{st, tgt, st.slow})
	}
	p.mu.Unlock()
	for _, j := range jobs {
		go p.probe(ctx, j.st, j.tgt, j.slow)
	}
}

// probe runs one probe (once a slot is free) and records it.
func (p *Prober) probe(ctx context.Context, st *probeState, tgt probeTarget, slow bool) {
	sem := p.sem
	if slow {
		sem = p.slowSem
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		p.mu.Lock()
		st.inflight = false
		p.mu.Unlock()
		return
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, p.cfg.EffectiveTimeout())
	err := p.check(pctx, tgt)
	cancel()
	<-sem
	if ctx.Err() != nil {
		p.mu.Lock()
		st.inflight = false
		p.mu.Unlock()
		return // shutting down: a cancelled probe says nothing of the instance
	}
	p.record(st, tgt, err, time.Since(start))
}

// check probes tgt once: nil is up.
func (p *Prober) check(ctx context.Context, tgt probeTarget) error {
	addr := netip.AddrPortFrom(p.addr, uint16(tgt.port)).String()
	if tgt.path == "" {
		c, err := p.dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST on close: no TIME_WAIT for every probe
		}
		return c.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+tgt.path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "scafo-node-probe")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close() // never read: the status is the verdict
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("health path %s answered %d", tgt.path, resp.StatusCode)
	}
	return nil
}

// record applies one probe's result with hysteresis.
func (p *Prober) record(st *probeState, tgt probeTarget, err error, d time.Duration) {
	result := "up"
	if err != nil {
		result = "down"
	}
	p.m.results.WithLabelValues(tgt.kind(), result).Inc()
	p.m.duration.WithLabelValues(tgt.kind()).Observe(d.Seconds())

	p.mu.Lock()
	st.inflight = false
	if p.states[tgt.app] != st || st.target != tgt {
		p.mu.Unlock()
		return // the instance changed meanwhile: this result is about something else
	}
	now := time.Now()
	st.probes++
	st.last, st.lastDur = now, d
	st.slow = err != nil && probeErrText(err) == "timeout"
	changed := false
	var heldFor time.Duration
	held := false // a hold-down begun (logged once)
	if err == nil {
		st.lastErr = ""
		st.oks++
		st.fails = 0
		if !st.up && st.oks == p.cfg.UpAfter && !st.counted {
			heldFor, held = p.recoveredLocked(st, now)
		}
		if !st.up && st.oks >= p.cfg.UpAfter && !now.Before(st.heldUntil) {
			st.up, st.since, changed, st.counted = true, now, true, false
		}
	} else {
		st.lastErr = probeErrText(err)
		st.fails++
		st.oks = 0
		st.counted = false
		if st.up && st.fails >= p.cfg.DownAfter {
			st.up, st.since, changed = false, now, true
		}
	}
	up, lastErr := st.up, st.lastErr
	p.mu.Unlock()
	if held {
		p.log.Warn("instance probe: flapping, held down", "app", tgt.app, "port", tgt.port, "holdDown", heldFor.String())
	}
	if !changed {
		return
	}
	to := "down"
	if up {
		to = "up"
	}
	p.m.transitions.WithLabelValues(to).Inc()
	p.log.Info("instance probe: "+to, "app", tgt.app, "port", tgt.port, "kind", tgt.kind(), "err", lastErr)
	if inst, ok := p.declared(tgt.app); ok && inst.Ready && inst.Port == tgt.port {
		p.onChange()
	}
}

// recoveredLocked applies flap damping to a recovery of st at now (upAfter successes
// after being down; caller holds mu): it reports the hold-down begun or extended (0 when
// none), and whether one began (rather than extended one in force).
func (p *Prober) recoveredLocked(st *probeState, now time.Time) (time.Duration, bool) {
	window := time.Duration(p.cfg.FlapWindow)
	if window <= 0 {
		return 0, false
	}
	if n := len(st.recoveries); n > 0 && st.penalty > 0 {
		// Decay: the penalty halves for every whole window without a recovery.
		for quiet := now.Sub(st.recoveries[n-1]); quiet >= window && st.penalty > 0; quiet -= window {
			st.penalty /= 2
		}
		if st.penalty < time.Duration(p.cfg.HoldDown) {
			st.penalty = 0
		}
	}
	kept := st.recoveries[:0]
	for _, t := range st.recoveries {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	st.recoveries = append(kept, now)
	if st.penalty == 0 && len(st.recoveries) < p.cfg.FlapUps {
		return 0, false // not flapping: published up at once
	}
	if st.penalty == 0 {
		st.penalty = time.Duration(p.cfg.HoldDown)
	} else {
		st.penalty = min(2*st.penalty, time.Duration(p.cfg.HoldDownMax))
	}
	began := !now.Before(st.heldUntil)
	st.heldUntil = now.Add(st.penalty)
	p.m.holdDowns.Inc()
	return st.penalty, began
}

// stateLocked is app's probe state for its instance inst (caller holds mu), made at the
// first sight of the instance, of its new port or of its new incarnation. Damping
// belongs to the instance of the incarnation, not to its port: a new port (or the
// instance set again after a release, see gone) keeps the recoveries and the hold-down,
// is probed afresh, and starts from the instance's verdict; a down instance put on a
// new port is a recovery (recoveredLocked), trusted up unless damping holds it down.
//
// A change is taken only when it is the registry's current instance: a caller's view
// read before a later write (a round's or a heartbeat's snapshot) must not move the
// state back to the port left, which would count a recovery per stale view. Then the
// current state is returned as it is (nil when there is none).
func (p *Prober) stateLocked(app string, inst fleet.Instance, now time.Time) *probeState {
	st := p.states[app]
	if st != nil && st.target.appID == inst.AppID && st.target.port == inst.Port {
		return st
	}
	if cur, ok := p.declared(app); !ok || cur.Port != inst.Port || cur.AppID != inst.AppID {
		return st // a stale view
	}
	prev := st
	if prev == nil {
		prev = p.gone[app]
	}
	delete(p.gone, app)
	tgt := probeTarget{app: app, appID: inst.AppID, port: inst.Port}
	st = &probeState{target: tgt, up: true, since: now}
	p.states[app] = st
	if prev == nil || prev.target.appID != inst.AppID {
		return st // a new instance or incarnation: trusted until probed
	}
	st.target.path = prev.target.path
	st.recoveries, st.penalty, st.heldUntil = slices.Clone(prev.recoveries), prev.penalty, prev.heldUntil
	if !prev.up {
		if d, began := p.recoveredLocked(st, now); now.Before(st.heldUntil) {
			st.up, st.counted = false, true
			if began {
				p.log.Warn("instance probe: flapping across ports, held down", "app", app, "port", inst.Port, "holdDown", d.String())
			}
		}
	}
	return st
}

// dampedLocked reports whether st's damping still counts at now: a hold-down in force,
// a recovery within probe.flapWindow, a penalty not yet decayed, or an instance down
// when released within probe.flapWindow (setting it again is a recovery: without this
// a dead instance released and set again, over and over, would start trusted up every
// time, one published up and down per cycle) (caller holds mu).
func (p *Prober) dampedLocked(st *probeState, now time.Time) bool {
	window := time.Duration(p.cfg.FlapWindow)
	if window <= 0 {
		return false
	}
	if now.Before(st.heldUntil) {
		return true
	}
	if !st.up && !st.released.IsZero() && now.Sub(st.released) < window {
		return true
	}
	n := len(st.recoveries)
	if n == 0 {
		return false
	}
	quiet := now.Sub(st.recoveries[n-1])
	if quiet < window {
		return true
	}
	pen := st.penalty
	for ; quiet >= window && pen > 0; quiet -= window {
		pen /= 2
	}
	return pen >= time.Duration(p.cfg.HoldDown) && pen > 0
}

// probeErrText is a probe failure for status and logs: the error class, never anything
// the instance sent.
func probeErrText(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return err.Error()
	}
}

// refusal is why inst is down without a probe ("" when it is probed).
func (p *Prober) refusal(app string, inst fleet.Instance, shared map[int]bool) string {
	switch {
	case inst.Port == p.apiPort():
		return "port " + strconv.Itoa(inst.Port) + " is this node's API port"
	case shared[inst.Port]:
		return "port " + strconv.Itoa(inst.Port) + " is held by more than one application"
	}
	return ""
}

func sharedPorts(insts map[string]fleet.Instance) map[int]bool {
	seen := make(map[int]int, len(insts))
	for _, i := range insts {
		seen[i.Port]++
	}
	shared := map[int]bool{}
	for port, n := range seen {
		if n > 1 {
			shared[port] = true
		}
	}
	return shared
}

// verdictLocked is the probe's verdict on app's instance inst (caller holds mu): up
// until probes say otherwise. A new port (or incarnation) is taken here when the
// record's publication sees it before a round does (stateLocked).
func (p *Prober) verdictLocked(app string, inst fleet.Instance, shared map[int]bool) bool {
	if p.refusal(app, inst, shared) != "" {
		return false
	}
	if st := p.stateLocked(app, inst, time.Now()); st != nil {
		return st.up
	}
	return true // not probed yet: the declaration is trusted
}

// Publish is the instances map for this node's record: each instance's readiness is
// its declared readiness AND the probe's verdict.
func (p *Prober) Publish(insts map[string]fleet.Instance) map[string]fleet.Instance {
	if p == nil {
		return insts
	}
	shared := sharedPorts(insts)
	p.mu.Lock()
	defer p.mu.Unlock()
	for app, inst := range insts {
		if inst.Ready && !p.verdictLocked(app, inst, shared) {
			inst.Ready = false
			insts[app] = inst
		}
	}
	return insts
}

// Ready is the readiness /v1/health/instances/{app} answers for app's instance inst
// (declared ready): the prober's last verdict, without dialling anything. An anonymous
// caller hammering it costs a map lookup.
func (p *Prober) Ready(app string, inst fleet.Instance) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if why := p.refusal(app, inst, p.shared); why != "" {
		return false, why
	}
	if p.verdictLocked(app, inst, p.shared) {
		return true, ""
	}
	why := "probe failed"
	if st := p.states[app]; st != nil && st.heldLocked(time.Now()) {
		why = "held down after flapping"
	} else if st != nil && st.lastErr != "" {
		why += ": " + st.lastErr
	}
	return false, why
}

// down counts instances held down by their probes or refused a probe (the
// scafo_instance_probe_down gauge).
func (p *Prober) down() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for app, st := range p.states {
		if !st.up || p.refusal(app, fleet.Instance{Port: st.target.port}, p.shared) != "" {
			n++
		}
	}
	return float64(n)
}

// Status lists insts (this node's instances) with their probe state, sorted by app.
func (p *Prober) Status(insts map[string]fleet.Instance) []api.Instance {
	published := p.Publish(cloneInstances(insts))
	out := make([]api.Instance, 0, len(insts))
	var shared map[int]bool
	if p != nil {
		shared = sharedPorts(insts)
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	for app, inst := range insts {
		is := api.Instance{App: app, Port: inst.Port, Declared: inst.Ready, Ready: published[app].Ready}
		if p != nil {
			ps := &api.Probe{Kind: "tcp", Up: true, Refused: p.refusal(app, inst, shared)}
			if st := p.states[app]; st != nil && st.target.port == inst.Port && st.target.appID == inst.AppID {
				ps.Kind, ps.Path, ps.Up, ps.Probes = st.target.kind(), st.target.path, st.up, st.probes
				ps.ConsecutiveFailures, ps.LastError, ps.Since = st.fails, st.lastErr, st.since.UTC()
				now := time.Now()
				for _, r := range st.recoveries {
					if now.Sub(r) < time.Duration(p.cfg.FlapWindow) {
						ps.Recoveries++
					}
				}
				ps.HoldDownMs = float64(st.penalty.Milliseconds())
				if st.heldLocked(now) {
					t := st.heldUntil.UTC()
					ps.HeldDownUntil = &t
				}
				if !st.last.IsZero() {
					t := st.last.UTC()
					ps.LastProbe = &t
					ps.LastDurationMs = float64(st.lastDur.Microseconds()) / 1000
				}
			}
			if ps.Refused != "" {
				ps.Up = false
			}
			is.Probe = ps
		}
		out = append(out, is)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].App < out[j].App })
	return out
}

func cloneInstances(m map[string]fleet.Instance) map[string]fleet.Instance {
	out := make(map[string]fleet.Instance, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
