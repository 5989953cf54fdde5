package traefikprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// traefikProvider is the method set Traefik's plugin loader requires of the value
// New returns (pkg/plugins/providers.go, PP). Asserted here because the plugin cannot
// import Traefik.
type traefikProvider interface {
	Init() error
	Provide(cfgChan chan<- json.Marshaler) error
	Stop() error
}

var _ traefikProvider = (*Provider)(nil)

// Provider polls scafo nodes and emits Traefik dynamic configurations.
type Provider struct {
	name      string
	parent    context.Context
	s         settings
	endpoints []string // as configured, for logs
	client    *http.Client

	// logLine writes one log line; warn marks what an operator should see. Not
	// variadic: Yaegi v0.16.1 mis-compiles calls to variadic func-typed fields.
	logLine func(warn bool, line string)

	// probe observes what this Traefik serves (Config.AppliedProbe); nil when off.
	probe *prober

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// New validates the configuration and returns a provider that has not started yet.
// name is the provider name Traefik assigns ("plugin-<key>"); it prefixes every log
// line.
func New(ctx context.Context, config *Config, name string) (*Provider, error) {
	s, err := parseConfig(config)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid configuration: %w", name, err)
	}
	if s.defaultStateFile {
		s.stateFile = name + ".last.json"
	}
	if ctx == nil {
		ctx = context.Background()
	}

	var endpoints []string
	for _, e := range config.Endpoints {
		endpoints = append(endpoints, strings.TrimSpace(e))
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 2

	p := &Provider{
		name:      name,
		parent:    ctx,
		s:         s,
		endpoints: endpoints,
		client:    &http.Client{Transport: transport},
	}
	if s.appliedProbe != "" {
		if p.probe, err = newProber(s.appliedProbe); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	// Traefik hands the plugin's stderr (the log package) to its logger at ERROR
	// level and its stdout (fmt.Print*) at DEBUG level.
	p.logLine = func(warn bool, line string) {
		if warn {
			log.Print(name + ": " + line)
		} else {
			fmt.Println(name + ": " + line)
		}
	}
	return p, nil
}

// warnf logs what an operator should see (endpoint switches, outages); under Traefik
// it lands at ERROR level, Traefik's default.
func (p *Provider) warnf(format string, args ...interface{}) {
	p.logLine(true, fmt.Sprintf(format, args...))
}

// debugf logs routine events; under Traefik it lands at DEBUG level.
func (p *Provider) debugf(format string, args ...interface{}) {
	p.logLine(false, fmt.Sprintf(format, args...))
}

// Init is part of Traefik's provider contract; New has already validated everything.
func (p *Provider) Init() error {
	return nil
}

// Provide starts polling in a goroutine and returns at once. Each configuration is
// sent to cfgChan as a json.RawMessage, only when it differs from the last one sent.
// Nothing is ever sent because a node failed.
func (p *Provider) Provide(cfgChan chan<- json.Marshaler) error {
	if cfgChan == nil {
		return errors.New("nil configuration channel")
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("provider already started")
	}
	p.started = true

	ctx, cancel := context.WithCancel(p.parent)
	done := make(chan struct{})
	p.cancel = cancel
	p.done = done

	p.debugf("starting: endpoints %s, watch %t", strings.Join(p.endpoints, ", "), p.s.watch)
	go p.run(ctx, cfgChan, done)
	return nil
}

// Stop cancels any request in flight and returns once the polling goroutine has
// exited. It is safe to call more than once, and before Provide.
func (p *Provider) Stop() error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.mu.Unlock()

	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	p.client.CloseIdleConnections()
	return nil
}

// run is the polling loop. It owns all polling state.
func (p *Provider) run(ctx context.Context, cfgChan chan<- json.Marshaler, done chan struct{}) {
	defer close(done)

	n := len(p.s.endpoints)
	cur := 0   // the endpoint we stick to
	last := "" // key of the last configuration sent
	lastETag := false
	failures := 0 // consecutive failed requests, across endpoints

	// Order across nodes: the store serial (and epoch) the configuration sent was
	// derived from, or confirmed at since (a 304, or the same body, from a node at a
	// later serial). ordered is false before any, and after a legacy node's
	// configuration (no X-Scafo-Serial) was sent: its place in the order is unknown.
	ordered := false
	var serial uint64
	epoch := ""
	// behind is the ETag of an older configuration the current endpoint serves (a node
	// a tick behind, after a switch): not sent; the next long-poll waits past it.
	behind := ""

	// What the nodes are told this Traefik applied (see report): a configuration
	// counts once AppliedDelay has passed since it was handed to Traefik (pending), or,
	// with the applied probe, once this Traefik is seen serving it (probe.go).
	var applied, pending appliedState
	pendingAt := time.Time{}
	var gen, pendingGen uint64 // configurations handed over; the pending one's (0: no probe router)
	probeWarned := false
	// hand adds the probe router for the next generation (when the probe is on) to a
	// configuration about to be handed over.
	hand := func(body []byte) json.RawMessage {
		pendingGen = 0
		if p.probe == nil {
			return json.RawMessage(body)
		}
		gen++
		out, err := p.probe.withRouter(body, gen)
		if err != nil {
			p.warnf("appliedProbe: %v; handing it over without the probe router (reported applied after appliedDelay)", err)
			return json.RawMessage(body)
		}
		pendingGen = gen
		probeWarned = false
		return json.RawMessage(out)
	}
	revision := "" // of the configuration sent

	// The state file: the last configuration applied before this start. Its serial
	// seeds the order, so a restart never goes back either; its configuration is
	// emitted only if no node answers, or they answer with an older one.
	saved := p.loadSaved()
	if saved != nil && saved.HasSerial {
		ordered, serial, epoch = true, saved.Serial, saved.Epoch
	}
	emitSaved := func() bool {
		msg := hand(saved.Config)
		p.warnf("emitting the configuration saved in %s (%s, serial %d): no node has a newer one", p.s.stateFile, saved.Key, saved.Serial)
		select {
		case cfgChan <- msg:
		case <-ctx.Done():
			return false
		}
		last, lastETag = saved.Key, saved.ETag
		revision = saved.Revision
		pending.ok = saved.HasSerial
		pending.serial = saved.Serial
		pending.epoch = saved.Epoch
		pending.revision = saved.Revision
		pendingAt = time.Now()
		return true
	}

	// A 304, or a 200 that is not sent, faster than this from a long-poll means the
	// node did not hold the request: pause instead of spinning.
	holdMin := p.s.watchWait / 2
	if holdMin > time.Second {
		holdMin = time.Second
	}

	for {
		longPoll := p.s.watch && lastETag
		started := time.Now()
		wait := p.s.watchWait
		if behind != "" && wait > behindWait {
			wait = behindWait
		}
		if pending.ok && p.pendingApplied(ctx, pendingGen, pendingAt, &probeWarned) {
			// Field by field, one statement each: plain constructs for Yaegi.
			applied.ok = true
			applied.serial = pending.serial
			applied.epoch = pending.epoch
			applied.revision = pending.revision
			pending.ok = false
		}
		// A configuration handed over but not yet counted applied: this long-poll ends
		// when it will be, so the next one reports it (a change still arrives at once).
		shortWait := false
		if pending.ok && pendingGen != 0 {
			// The probe did not see it serving within probeWarnAfter: look again
			// every second, on the way to each poll.
			if wait > time.Second {
				wait = time.Second
				shortWait = true
			}
		} else if pending.ok {
			if rem := p.s.appliedDelay - time.Since(pendingAt); rem < wait {
				wait = rem
				if wait < time.Millisecond { // no max builtin in Yaegi v0.16.1
					wait = time.Millisecond
				}
				shortWait = true
			}
		}
		res, err := p.fetch(ctx, p.s.endpoints[cur], last, lastETag, longPoll, behind, wait, applied)
		if ctx.Err() != nil {
			return
		}

		pause := time.Duration(0)
		if err != nil {
			failures++
			p.reportFailure(cur, failures, last, err)
			cur = (cur + 1) % n
			behind = ""
			// Every endpoint gets one immediate attempt; after that, back off.
			if failures >= n {
				pause = p.s.pollInterval
				if last == "" && saved != nil {
					if !emitSaved() {
						return
					}
				}
			}
		} else {
			if failures >= n {
				p.warnf("%s answered; polling resumed", p.endpoints[cur])
			} else if failures > 0 {
				p.debugf("now reading from %s", p.endpoints[cur])
			}
			failures = 0

			older := ordered && res.hasSerial && res.epoch == epoch && res.serial < serial
			if older && last == "" && saved != nil {
				// Started, and the first node that answers is behind the saved state.
				if !emitSaved() {
					return
				}
				res.changed = res.key != last
			}
			sent, newlyBehind := false, false
			switch {
			case older:
				// Never go back: keep what was sent until this node catches up.
				if res.changed && res.key != behind {
					p.warnf("%s serves configuration %s derived from serial %d, older than serial %d already applied: keeping it until that node catches up",
						p.endpoints[cur], res.key, res.serial, serial)
					if res.etag {
						behind, newlyBehind = res.key, true
					}
				}
			case res.changed:
				// Converted outside the select: Yaegi v0.16.1 sends nil for
				// "case ch <- json.RawMessage(res.body):".
				msg := json.RawMessage(res.body)
				out := hand(res.body)
				p.debugf("emitting configuration %s from %s (%d bytes, serial %s)", res.key, p.endpoints[cur], len(res.body), serialText(res))
				select {
				case cfgChan <- out:
				case <-ctx.Done():
					return
				}
				last, lastETag = res.key, res.etag
				sent = true
				behind = ""
				ordered, serial, epoch = res.hasSerial, res.serial, res.epoch
				revision = res.revision
				pending.ok = res.hasSerial
				pending.serial = res.serial
				pending.epoch = res.epoch
				pending.revision = res.revision
				pendingAt = time.Now()
				if p.s.stateFile != "" && notOlderThanSaved(saved, res.hasSerial, res.serial, res.epoch) {
					st := &savedState{V: 1, Key: res.key, ETag: res.etag, HasSerial: res.hasSerial, Serial: res.serial,
						Epoch: res.epoch, Revision: res.revision, Config: msg}
					if err := saveState(p.s.stateFile, st); err != nil {
						p.warnf("saving the configuration to %s: %v", p.s.stateFile, err)
					} else {
						saved = st
					}
				}
			case behind != "":
				// The node reached the applied serial without moving past the older
				// body (a 304 for either ETag): ask again without it, so a body it
				// still serves at this serial is sent.
				if res.hasSerial {
					p.debugf("%s caught up (serial %d)", p.endpoints[cur], res.serial)
					behind = ""
				}
			case res.hasSerial && (!ordered || res.epoch != epoch || res.serial > serial):
				// The configuration sent, confirmed (a 304 for it, or the same body) by a
				// node at a later serial, or in another epoch (an adopted store starts
				// an order of its own).
				ordered, serial, epoch = true, res.serial, res.epoch
				if pending.ok {
					pending.serial = serial
					pending.epoch = epoch
				} else {
					applied.ok = true
					applied.serial = serial
					applied.epoch = epoch
					applied.revision = revision
				}
			}

			switch {
			case !p.s.watch || !lastETag:
				pause = p.s.pollInterval
			case newlyBehind:
				// Long-poll at once past the older body: the node answers when it moves.
			case !sent && !shortWait && time.Since(started) < holdMin:
				pause = p.s.pollInterval
			}
		}

		if pause > 0 && !sleep(ctx, pause) {
			return
		}
	}
}

// pendingApplied tells whether the configuration handed over at pendingAt counts as
// applied. Without the probe (gen 0): once AppliedDelay has passed. With it: once this
// Traefik serves the probe router of gen, watched every probeEvery for up to
// probeWarnAfter after the hand-over (the loop polls no node meanwhile: Traefik is
// building, a newer configuration would wait behind it in Traefik anyway), then once
// per call, with one warning.
func (p *Provider) pendingApplied(ctx context.Context, gen uint64, pendingAt time.Time, warned *bool) bool {
	if gen == 0 {
		return time.Since(pendingAt) >= p.s.appliedDelay
	}
	for {
		ok, why := p.probe.serving(ctx, gen)
		if ok {
			if *warned {
				p.warnf("appliedProbe: %s now serves the configuration handed over %s ago", p.probe.base, time.Since(pendingAt).Round(time.Millisecond))
			}
			return true
		}
		if ctx.Err() != nil || *warned {
			return false
		}
		if time.Since(pendingAt) >= probeWarnAfter {
			*warned = true
			p.warnf("appliedProbe: %s does not serve the configuration handed over %s ago (last answer: %s); it is not reported applied until it does (is the URL one of this Traefik's HTTP entrypoints, without a redirection or an entrypoint middleware?)",
				p.probe.base, probeWarnAfter, why)
			return false
		}
		if !sleep(ctx, probeEvery) {
			return false
		}
	}
}

// appliedState is what the plugin reports applied to the nodes.
type appliedState struct {
	ok       bool // a configuration with a serial was applied
	serial   uint64
	epoch    string
	revision string
}

// loadSaved reads the state file at start (nil when there is none or it is unusable).
func (p *Provider) loadSaved() *savedState {
	if p.s.stateFile == "" {
		return nil
	}
	st, err := loadState(p.s.stateFile)
	if err != nil {
		p.warnf("ignoring the state file %s: %v", p.s.stateFile, err)
		return nil
	}
	if st != nil {
		p.debugf("state file %s: configuration %s, serial %d", p.s.stateFile, st.Key, st.Serial)
	}
	return st
}

// behindWait bounds a long-poll while the endpoint is behind. A node that catches up
// to a revision it already serves (a change and its revert: it derives the same body at
// a later serial) does not wake long-polls, so the 304 that shows it caught up comes
// when the wait ends: within this bound, not WatchWait. Two seconds is the node's
// default reconcile interval; being behind lasts about that long.
const behindWait = 2 * time.Second

// serialText names the store serial of an answer for logs.
func serialText(res fetchResult) string {
	if !res.hasSerial {
		return "none"
	}
	if res.epoch == "" {
		return strconv.FormatUint(res.serial, 10)
	}
	return strconv.FormatUint(res.serial, 10) + " " + res.epoch
}

// reportFailure logs a failed request. The first round of failures is logged with
// each switch; once every endpoint has failed, one summary line is logged and
// further failures go to the debug log until an endpoint answers again.
func (p *Provider) reportFailure(cur, failures int, last string, err error) {
	n := len(p.s.endpoints)
	next := (cur + 1) % n
	what := "keeping the last configuration (" + last + ")"
	if last == "" {
		what = "no configuration received yet"
	}

	switch {
	case failures > n:
		p.debugf("%s: %v", p.endpoints[cur], err)
	case n == 1:
		p.warnf("%s: %v; %s; retrying every %s", p.endpoints[cur], err, what, p.s.pollInterval)
	default:
		p.warnf("%s: %v; switching to %s", p.endpoints[cur], err, p.endpoints[next])
		if failures == n {
			p.warnf("all %d endpoints failed; %s; retrying every %s", n, what, p.s.pollInterval)
		}
	}
}

// sleep waits for d, or returns false as soon as ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
