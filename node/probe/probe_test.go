package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/node/internal/testinst"
	"github.com/scafo/ingress/render/fleet"
)

// newTestProber is a prober over a fixed set of instances on 127.0.0.1, driven by hand
// (round) rather than by its ticker.
func newTestProber(t *testing.T, cfg Config, insts map[string]fleet.Instance, paths map[string]string) (*Prober, *prometheus.Registry, *atomic.Int64) {
	t.Helper()
	p := newProber(cfg, netip.MustParseAddr("127.0.0.1"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	var mu sync.Mutex
	p.apiPort = 1
	p.instances = func() map[string]fleet.Instance {
		mu.Lock()
		defer mu.Unlock()
		return cloneInstances(insts)
	}
	p.declared = func(app string) (fleet.Instance, bool) {
		mu.Lock()
		defer mu.Unlock()
		i, ok := insts[app]
		return i, ok
	}
	p.healthPath = func(app, _ string) string { return paths[app] }
	changes := &atomic.Int64{}
	p.onChange = func() { changes.Add(1) }
	reg := prometheus.NewRegistry()
	p.m = newProbeMetrics(reg, p.down)
	return p, reg, changes
}

// probeRound runs one round and waits until every probe it started has finished.
func probeRound(t *testing.T, p *Prober) {
	t.Helper()
	p.Round(context.Background(), p.now())
	waitIdle(t, p)
}

// waitIdle waits until no probe is in flight.
func waitIdle(t *testing.T, p *Prober) {
	t.Helper()
	nodetest.WaitFor(t, 10*time.Second, "the round's probes", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, st := range p.states {
			if st.inflight {
				return false
			}
		}
		return true
	})
}

func (p *Prober) isUp(app string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.states[app].up
}

// Hysteresis: one failure between successes flaps nothing; downAfter failures in a row
// mark the instance down; one success does not bring it back, upAfter do.
func TestProbeHysteresisNeedsConsecutiveResults(t *testing.T) {
	app := testinst.StartHealth(t, "/up", http.StatusOK, "")
	cfg := Config{Interval: ptypes.Duration(time.Second), Timeout: ptypes.Duration(time.Second), DownAfter: 2, UpAfter: 2, Concurrency: 4}
	p, _, changes := newTestProber(t, cfg, map[string]fleet.Instance{"shop": {Port: app.Port, Ready: true}}, map[string]string{"shop": "/up"})
	step := func(code int, wantUp bool, what string) {
		t.Helper()
		app.Code.Store(int64(code))
		probeRound(t, p)
		if got := p.isUp("shop"); got != wantUp {
			t.Fatalf("%s: up=%v, want %v", what, got, wantUp)
		}
	}
	step(200, true, "healthy")
	for i := range 5 { // alternating: never two failures in a row
		step(503, true, fmt.Sprintf("a lone failure (%d)", i))
		step(200, true, fmt.Sprintf("a success after it (%d)", i))
	}
	if n := changes.Load(); n != 0 {
		t.Fatalf("%d readiness changes published while the instance never failed twice in a row", n)
	}
	step(503, true, "first failure")
	step(503, false, "second failure in a row")
	if n := changes.Load(); n != 1 {
		t.Fatalf("%d changes published on going down, want 1", n)
	}
	step(200, false, "one success")
	step(503, false, "a failure again")
	step(200, false, "one success again")
	step(200, true, "second success in a row")
	if n := changes.Load(); n != 2 {
		t.Fatalf("%d changes published, want 2 (down, up)", n)
	}
}

// hangingInstances are n listeners that accept connections and never answer, counting
// the connections held open at once across all of them (and the most ever).
type hangingInstances struct {
	ports          []int
	inflight, most atomic.Int64
	per            []atomic.Int64 // open connections per listener
	perMost        atomic.Int64   // the most one listener ever held
}

func startHanging(t *testing.T, n int) *hangingInstances {
	t.Helper()
	h := &hangingInstances{per: make([]atomic.Int64, n)}
	raise := func(v *atomic.Int64, n int64) {
		for m := v.Load(); n > m && !v.CompareAndSwap(m, n); m = v.Load() {
		}
	}
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		h.ports = append(h.ports, ln.Addr().(*net.TCPAddr).Port)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				raise(&h.most, h.inflight.Add(1))
				raise(&h.perMost, h.per[i].Add(1))
				go func() {
					io.Copy(io.Discard, c) // until the prober gives up and closes
					h.inflight.Add(-1)
					h.per[i].Add(-1)
					c.Close()
				}()
			}
		}()
	}
	return h
}

// Hanging instances (accept, never answer their health path) are down after their
// timeouts; never more than probe.concurrency probe sockets are open at once; a hanging
// instance is not probed again while its probe runs; and once known slow, they are
// probed in their own lane, so a refusing instance's verdict never waits behind them.
func TestSlowInstancesNeitherStallOthersNorOpenUnboundedSockets(t *testing.T) {
	const hanging, timeout = 16, 200 * time.Millisecond
	h := startHanging(t, hanging)
	insts := map[string]fleet.Instance{}
	paths := map[string]string{}
	for i, port := range h.ports {
		app := fmt.Sprintf("slow%02d", i)
		insts[app] = fleet.Instance{Port: port, Ready: true}
		paths[app] = "/healthz"
	}
	dead := testinst.StartTCP(t)
	dead.Close() // refuses
	insts["dead"] = fleet.Instance{Port: dead.Port, Ready: true}
	cfg := Config{Interval: ptypes.Duration(time.Second), Timeout: ptypes.Duration(timeout), DownAfter: 2, UpAfter: 2, Concurrency: 4}
	p, reg, _ := newTestProber(t, cfg, insts, paths)

	// Two rounds back to back: the second finds the hanging probes in flight.
	p.Round(context.Background(), time.Now())
	p.Round(context.Background(), time.Now())
	waitIdle(t, p)
	probeRound(t, p)
	// The listeners see a probe's close a moment after the prober frees its slot, so
	// their count may overlap by a few; unbounded, it would be 16.
	if m := h.most.Load(); m > 2*int64(cfg.Concurrency) {
		t.Errorf("%d probe connections open at once, want at most about probe.concurrency (%d)", m, cfg.Concurrency)
	}
	if m := h.perMost.Load(); m > 1 {
		t.Errorf("one hanging instance held %d probe connections at once: probed again while in flight", m)
	}
	if skipped := counterValue(t, reg, "scafo_instance_probe_skipped_total"); skipped < 1 {
		t.Errorf("skipped probes %v: the back-to-back round should have skipped the probes in flight", skipped)
	}
	for i := range hanging {
		if p.isUp(fmt.Sprintf("slow%02d", i)) {
			t.Fatalf("slow%02d is up after two timed-out probes", i)
		}
	}
	if p.isUp("dead") {
		t.Error("the refusing instance is still up after its probes")
	}

	// Now known slow: a round's verdict on the refusing instance comes in well under one
	// probe timeout, though 16 hanging probes start with it on 4 slots.
	p.mu.Lock()
	before := p.states["dead"].probes
	p.mu.Unlock()
	t0 := time.Now()
	p.Round(context.Background(), time.Now())
	nodetest.WaitFor(t, 10*time.Second, "the refusing instance's next probe", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.states["dead"].probes > before
	})
	if d := time.Since(t0); d >= timeout {
		t.Errorf("the refusing instance's probe finished %s after the round began: it waited behind hanging probes (timeout %s)", d.Round(time.Millisecond), timeout)
	}
	waitIdle(t, p)
	if m := h.most.Load(); m > 2*int64(cfg.Concurrency) {
		t.Errorf("%d probe connections open at once, want at most about %d", m, cfg.Concurrency)
	}
	t.Logf("%d hanging instances on %d slots: at most %d probe connections seen open at once", hanging, cfg.Concurrency, h.most.Load())
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// The probe's HTTP client dials the node's own address only, whatever URL it is given.
func TestProbeClientDialsOnlyTheNodesOwnAddress(t *testing.T) {
	other := testinst.StartHealth(t, "/healthz", http.StatusOK, "")
	p, _, _ := newTestProber(t, Config{Interval: ptypes.Duration(time.Second), Timeout: ptypes.Duration(time.Second), DownAfter: 1, UpAfter: 1, Concurrency: 2}, nil, nil)
	for _, target := range []string{
		fmt.Sprintf("http://127.0.0.2:%d/healthz", other.Port), // another loopback address
		"http://localhost:" + strconv.Itoa(other.Port) + "/healthz",
		"http://[::1]:" + strconv.Itoa(other.Port) + "/healthz",
	} {
		_, err := p.client.Get(target)
		if !errors.Is(err, errProbeAddress) {
			t.Errorf("GET %s: %v, want the dialler's refusal", target, err)
		}
	}
	if other.Hits.Load() != 0 {
		t.Error("a refused dial reached the listener")
	}
}

// Hostile answers from a tenant's instance: a body that never ends is not read (up at
// once), headers beyond the bound are a failure, neither holds the probe past its
// timeout.
func TestProbeBoundsWhatAnInstanceSends(t *testing.T) {
	endless := rawHTTPInstance(t, "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n", true)
	bigHeaders := rawHTTPInstance(t, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n", false)
	insts := map[string]fleet.Instance{"endless": {Port: endless, Ready: true}, "big": {Port: bigHeaders, Ready: true}}
	paths := map[string]string{"endless": "/healthz", "big": "/healthz"}
	cfg := Config{Interval: ptypes.Duration(time.Second), Timeout: ptypes.Duration(500 * time.Millisecond), DownAfter: 1, UpAfter: 1, Concurrency: 4}
	p, _, _ := newTestProber(t, cfg, insts, paths)
	probeRound(t, p)
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.states["endless"]; !st.up || st.lastDur >= 500*time.Millisecond {
		t.Errorf("endless body: up=%v after %s, want up without reading the body", st.up, st.lastDur)
	}
	if st := p.states["big"]; st.up || !strings.Contains(st.lastErr, "header") {
		t.Errorf("64 KiB of headers: up=%v err %q, want down (headers beyond the bound)", st.up, st.lastErr)
	}
}

// rawHTTPInstance answers every connection with head, then (endless) writes forever.
func rawHTTPInstance(t *testing.T, head string, endless bool) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for { // the request's head
					l, err := br.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				if _, err := io.WriteString(c, head); err != nil {
					return
				}
				chunk := []byte(strings.Repeat("x", 32<<10))
				for endless {
					c.SetWriteDeadline(time.Now().Add(5 * time.Second))
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// dampedConfig is a hand-driven prober's settings with flap damping on: 3 recoveries in
// a minute are a flap, held down 1 s, doubling, at most 2 s.
func dampedConfig() Config {
	return Config{Interval: ptypes.Duration(time.Second), Timeout: ptypes.Duration(500 * time.Millisecond), DownAfter: 2, UpAfter: 2, Concurrency: 4,
		FlapWindow: ptypes.Duration(time.Minute), FlapUps: 3, HoldDown: ptypes.Duration(time.Second), HoldDownMax: ptypes.Duration(2 * time.Second)}
}

// A tenant opening and closing its port over and over: every published verdict change
// is a record rewrite and a serial bump (onChange: the heartbeat kick), a re-render and
// a reload of every Traefik. Damped, 20 flaps publish 5 changes (down, up, down, up,
// down: the third recovery is held), not 40; the instance stays out while it flaps and
// for the hold-down after; it comes back up once the hold ends, and going down is
// published at once even while it carries a penalty.
func TestProbeFlappingInstanceIsDamped(t *testing.T) {
	inst := testinst.StartTCP(t)
	cfg := dampedConfig()
	p, reg, changes := newTestProber(t, cfg, map[string]fleet.Instance{"shop": {Port: inst.Port, Ready: true}}, nil)
	// The prober's clock is the test's: the hold-down ends when the test moves it on.
	var clockMu sync.Mutex
	clock := time.Now()
	p.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	const flaps = 20
	for i := range flaps {
		inst.Close()
		probeRound(t, p)
		probeRound(t, p)
		if p.isUp("shop") {
			t.Fatalf("flap %d: still up after %d refused probes: going down was delayed", i, cfg.DownAfter)
		}
		inst.Open()
		probeRound(t, p)
		probeRound(t, p)
	}
	bumps := changes.Load()
	t.Logf("%d flaps (%d probe transitions each way): %d serial bumps (undamped: %d)", flaps, flaps, bumps, 2*flaps)
	if bumps > 5 {
		t.Fatalf("%d serial bumps for %d flaps, want at most 5 (down, up, down, up, down; then held down)", bumps, flaps)
	}
	if p.isUp("shop") {
		t.Fatal("the flapping instance is published up during its hold-down")
	}
	if got, want := counterValue(t, reg, "scafo_instance_probe_hold_downs_total"), float64(flaps-2); got != want {
		t.Errorf("scafo_instance_probe_hold_downs_total %v, want %v (every recovery from the third)", got, want)
	}
	insts := map[string]fleet.Instance{"shop": {Port: inst.Port, Ready: true}}
	if pub := p.Publish(cloneInstances(insts)); pub["shop"].Ready {
		t.Error("the record publishes the held-down instance ready")
	}
	if ok, why := p.Ready("shop", insts["shop"]); ok || !strings.Contains(why, "held down") {
		t.Errorf("health endpoint: ready=%v %q, want not ready, held down", ok, why)
	}
	st := p.Status(insts)
	ps := st[0].Probe
	if ps.HeldDownUntil == nil || ps.HoldDownMs != 2000 || ps.Recoveries != flaps || ps.Up || st[0].Ready {
		t.Fatalf("status while held down: %+v", ps)
	}
	until := *ps.HeldDownUntil

	// Stable from now on: still held until the hold-down ends, then up.
	probeRound(t, p)
	if p.isUp("shop") {
		t.Fatal("up before the hold-down ended")
	}
	clockMu.Lock()
	clock = until.Add(10 * time.Millisecond)
	clockMu.Unlock()
	probeRound(t, p)
	if !p.isUp("shop") {
		t.Fatal("not up after the hold-down ended and the probes pass")
	}
	if n := changes.Load(); n != bumps+1 {
		t.Fatalf("%d changes after the hold-down ended, want %d", n, bumps+1)
	}
	if ps := p.Status(insts)[0].Probe; ps.HeldDownUntil != nil || !ps.Up {
		t.Errorf("status after the hold-down: %+v", ps)
	}
	// Down is never delayed, penalty or not.
	inst.Close()
	probeRound(t, p)
	probeRound(t, p)
	if p.isUp("shop") || changes.Load() != bumps+2 {
		t.Fatalf("going down with a penalty: up=%v, %d changes (want down, %d)", p.isUp("shop"), changes.Load(), bumps+2)
	}
}

// A lone death and recovery (twice in the window: below probe.flapUps) is published up
// after upAfter successes, as without damping; so is the first recovery of a new
// instance on another port.
func TestProbeLoneRecoveryIsNotDelayed(t *testing.T) {
	inst := testinst.StartTCP(t)
	p, reg, changes := newTestProber(t, dampedConfig(), map[string]fleet.Instance{"shop": {Port: inst.Port, Ready: true}}, nil)
	for i := range 2 {
		inst.Close()
		probeRound(t, p)
		if !p.isUp("shop") {
			t.Fatalf("death %d: down after one failure", i)
		}
		probeRound(t, p)
		if p.isUp("shop") {
			t.Fatalf("death %d: up after two failures", i)
		}
		inst.Open()
		probeRound(t, p)
		if p.isUp("shop") {
			t.Fatalf("recovery %d: up after one success", i)
		}
		probeRound(t, p)
		if !p.isUp("shop") {
			t.Fatalf("recovery %d: not up after two successes (delayed)", i)
		}
	}
	if n := changes.Load(); n != 4 {
		t.Errorf("%d changes published, want 4", n)
	}
	if n := counterValue(t, reg, "scafo_instance_probe_hold_downs_total"); n != 0 {
		t.Errorf("%v hold-downs for two lone recoveries", n)
	}
}

// The hold-down's growth and decay over an hour of a patient attacker (sits out each
// hold-down, then flaps again at once), on the default settings and the prober's own
// damping code (recoveredLocked) with a simulated clock: the published changes per
// minute, against 30/min undamped at a 1 s interval (2 s down, 2 s up).
func TestProbeFlapDampingBoundsAPatientFlapper(t *testing.T) {
	cfg := Defaults()
	p, _, _ := newTestProber(t, cfg, nil, nil)
	st := &probeState{up: true}
	now := time.Unix(0, 0)
	end := now.Add(time.Hour)
	bumps := 0
	for now.Before(end) {
		// 2 failures at 1 s: down, published.
		now = now.Add(2 * time.Second)
		st.up = false
		bumps++
		// 2 successes: a recovery; published up when the hold-down (if any) ends.
		now = now.Add(2 * time.Second)
		p.recoveredLocked(st, now)
		if st.heldUntil.After(now) {
			now = st.heldUntil.Add(time.Second - st.heldUntil.Sub(now)%time.Second) // next probe after it
		}
		st.up = true
		bumps++
	}
	perMin := float64(bumps) / 60
	t.Logf("patient flapper, default damping: %d serial bumps in an hour (%.1f/min; undamped 30/min)", bumps, perMin)
	if perMin > 3 {
		t.Errorf("%.1f bumps/min, want at most 3", perMin)
	}
	// Decay: after a quiet spell the penalty is forgotten (halved per window: 5 min
	// falls below 10 s in 5 windows), and a lone recovery is published at once again.
	st.up = false
	now = now.Add(6 * time.Duration(cfg.FlapWindow))
	if d, _ := p.recoveredLocked(st, now); d != 0 || st.heldUntil.After(now) || st.penalty != 0 {
		t.Errorf("after 6 quiet windows: hold-down %s, penalty %s, want none", d, st.penalty)
	}
}

// movableInstances is a hand-driven prober's instances that a test moves between
// rounds (the registry's view: instances and declared read the same map).
type movableInstances struct {
	mu sync.Mutex
	m  map[string]fleet.Instance
}

func (l *movableInstances) all() map[string]fleet.Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return cloneInstances(l.m)
}

func (l *movableInstances) get(app string) (fleet.Instance, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.m[app]
	return i, ok
}

func (l *movableInstances) set(app string, i *fleet.Instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i == nil {
		delete(l.m, app)
	} else {
		l.m[app] = *i
	}
}

func newMovableProber(t *testing.T, cfg Config, insts map[string]fleet.Instance) (*Prober, *movableInstances, *prometheus.Registry, *atomic.Int64) {
	t.Helper()
	p, reg, changes := newTestProber(t, cfg, nil, nil)
	l := &movableInstances{m: insts}
	p.instances, p.declared = l.all, l.get // before any round: nothing reads them yet
	return p, l, reg, changes
}

// Issue 25 item 3: damping belongs to the application's instance on this node, whatever
// its port. Before the fix a port change started a fresh state (trusted up, no
// recoveries, no hold-down), so a tenant alternating its instance between two ports
// (the pair a deploy uses, DESIGN §13) reset flap damping at every move: each move to a
// dead port was published ready, then down (a serial bump, a re-render and a reload of
// every Traefik), without end. Now the moves are damped like a flapping port: at most
// probe.flapUps-1 trusted recoveries, then held down; a published change per move is
// gone.
func TestProbeAlternatingPortsDoesNotResetFlapDamping(t *testing.T) {
	for _, tc := range []struct {
		name      string
		liveFirst bool // the first port listens (a live and a dead port), or neither does
	}{
		{"two dead ports", false},
		{"a live and a dead port", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := testinst.StartTCP(t), testinst.StartTCP(t)
			b.Close()
			if !tc.liveFirst {
				a.Close()
			}
			cfg := dampedConfig()
			p, insts, reg, changes := newMovableProber(t, cfg, map[string]fleet.Instance{"shop": {Port: a.Port, Ready: true, AppID: "id-shop"}})
			probeRound(t, p)
			probeRound(t, p)
			const moves = 20
			deadReady := 0 // moves after which the record would publish a dead port ready
			for i := range moves {
				to := b.Port
				if i%2 == 1 {
					to = a.Port
				}
				inst := fleet.Instance{Port: to, Ready: true, AppID: "id-shop"}
				insts.set("shop", &inst)
				dead := to == b.Port || !tc.liveFirst
				if p.Publish(insts.all())["shop"].Ready && dead {
					deadReady++
				}
				probeRound(t, p)
				probeRound(t, p)
				if dead && p.isUp("shop") {
					t.Fatalf("move %d: up after %d refused probes of port %d", i, cfg.DownAfter, to)
				}
			}
			bumps := changes.Load()
			t.Logf("%d moves: %d serial bumps from the probes, a dead port published ready after %d moves, %v hold-downs",
				moves, bumps, deadReady, counterValue(t, reg, "scafo_instance_probe_hold_downs_total"))
			if max := int64(2*cfg.FlapUps - 1); bumps > max {
				t.Errorf("%d serial bumps from the probes for %d moves between two ports, want at most %d (damped like a flapping port)", bumps, moves, max)
			}
			if deadReady > cfg.FlapUps {
				t.Errorf("a dead port was published ready after %d of %d moves, want at most %d (then held down)", deadReady, moves, cfg.FlapUps)
			}
			cur, _ := insts.get("shop") // back on the first port (live in the second case)
			if ok, why := p.Ready("shop", cur); ok || !strings.Contains(why, "held down") {
				t.Errorf("after alternating: ready=%v %q, want held down", ok, why)
			}

			// Released and set again by the same incarnation: the damping is kept.
			insts.set("shop", nil)
			probeRound(t, p)
			insts.set("shop", &cur)
			if p.Publish(insts.all())["shop"].Ready {
				t.Error("released and set again: published ready, the hold-down was forgotten")
			}
			// A new incarnation of the name is another instance: trusted, undamped.
			fresh := fleet.Instance{Port: a.Port, Ready: true, AppID: "id-new"}
			insts.set("shop", &fresh)
			if !p.Publish(insts.all())["shop"].Ready {
				t.Error("a new incarnation inherited the old one's hold-down")
			}
		})
	}
}

// The deploy the pairs are for (DESIGN §13): an instance that is up moves between two
// live ports; every move is published ready at once (trusted, never waiting for
// probes), counts no recovery and publishes no probe change.
func TestProbeAMoveOfAnUpInstanceIsPublishedReadyAtOnce(t *testing.T) {
	a, b := testinst.StartTCP(t), testinst.StartTCP(t)
	p, insts, reg, changes := newMovableProber(t, dampedConfig(), map[string]fleet.Instance{"shop": {Port: a.Port, Ready: true, AppID: "id-shop"}})
	probeRound(t, p)
	for i := range 20 {
		to := []int{b.Port, a.Port}[i%2]
		insts.set("shop", &fleet.Instance{Port: to, Ready: true, AppID: "id-shop"})
		if !p.Publish(insts.all())["shop"].Ready {
			t.Fatalf("move %d to live port %d: not published ready before its probes", i, to)
		}
		probeRound(t, p)
		if !p.isUp("shop") {
			t.Fatalf("move %d: down on a live port", i)
		}
	}
	if n := changes.Load(); n != 0 {
		t.Errorf("%d probe changes published for moves between live ports, want 0", n)
	}
	if n := counterValue(t, reg, "scafo_instance_probe_hold_downs_total"); n != 0 {
		t.Errorf("%v hold-downs for moves of an up instance", n)
	}
}

// Damping whatever the port (e2b349c) keeps an instance's damping across a release only
// "while its damping counts" (dampedLocked: a hold-down, or a recovery within the
// window). A dead instance found down before any recovery counts nothing: released
// (one probe round seeing it gone) and set again on the same dead port, it starts
// afresh, trusted up, and is published ready, then down, every cycle, without end.
// Each cycle is a record rewrite and a serial bump: a reload of every Traefik.
func TestHostileReleaseAndSetAgainOfADeadInstanceIsDamped(t *testing.T) {
	dead := testinst.StartTCP(t)
	dead.Close()
	cfg := dampedConfig()
	inst := fleet.Instance{Port: dead.Port, Ready: true, AppID: "id-shop"}
	p, insts, _, changes := newMovableProber(t, cfg, map[string]fleet.Instance{"shop": inst})
	const cycles = 20
	deadReady := 0
	for i := range cycles {
		insts.set("shop", &inst)
		if p.Publish(insts.all())["shop"].Ready {
			deadReady++
		}
		for range cfg.DownAfter {
			probeRound(t, p)
		}
		if p.isUp("shop") {
			t.Fatalf("cycle %d: up after %d refused probes", i, cfg.DownAfter)
		}
		insts.set("shop", nil)
		probeRound(t, p) // the round sees the release
	}
	t.Logf("%d release/set cycles of a dead port: published ready %d times, %d probe changes", cycles, deadReady, changes.Load())
	if deadReady > cfg.FlapUps {
		t.Errorf("a dead port released and set again was published ready %d times in %d cycles, want at most %d (damped like a port move)", deadReady, cycles, cfg.FlapUps)
	}
	if max := int64(2*cfg.FlapUps - 1); changes.Load() > max {
		t.Errorf("%d probe changes published, want at most %d", changes.Load(), max)
	}
}
