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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/render/fleet"
)

// Prober probes this node's instances. A nil *Prober is "probing disabled": every
// method then answers from the declaration alone.
type Prober struct {
	cfg     Config
	addr    netip.Addr
	apiPort int
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
	// now is the clock of results, verdicts and hold-downs (time.Now; a test drives it).
	now func() time.Time

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
	APIPort int
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
		now:     time.Now,
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

// Interval is how often the node runs a round (probe.interval).
func (p *Prober) Interval() time.Duration { return time.Duration(p.cfg.Interval) }

// Round is one step of the prober at now (the node schedules it every probe.interval):
// it starts one probe of every instance whose previous probe has finished. The probes
// run in the background under ctx, each bounded by probe.timeout.
func (p *Prober) Round(ctx context.Context, now time.Time) {
	insts := p.instances()
	shared := sharedPorts(insts)
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
