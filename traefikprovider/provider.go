package traefikprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
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

	// A 304, or a 200 with the same ETag, faster than this from a long-poll means the
	// node did not hold the request: pause instead of spinning.
	holdMin := p.s.watchWait / 2
	if holdMin > time.Second {
		holdMin = time.Second
	}

	for {
		longPoll := p.s.watch && lastETag
		started := time.Now()
		res, err := p.fetch(ctx, p.s.endpoints[cur], last, lastETag, longPoll)
		if ctx.Err() != nil {
			return
		}

		pause := time.Duration(0)
		if err != nil {
			failures++
			p.reportFailure(cur, failures, last, err)
			cur = (cur + 1) % n
			// Every endpoint gets one immediate attempt; after that, back off.
			if failures >= n {
				pause = p.s.pollInterval
			}
		} else {
			if failures >= n {
				p.warnf("%s answered; polling resumed", p.endpoints[cur])
			} else if failures > 0 {
				p.debugf("now reading from %s", p.endpoints[cur])
			}
			failures = 0

			if res.changed {
				// Converted outside the select: Yaegi v0.16.1 sends nil for
				// "case ch <- json.RawMessage(res.body):".
				msg := json.RawMessage(res.body)
				p.debugf("emitting configuration %s from %s (%d bytes)", res.key, p.endpoints[cur], len(res.body))
				select {
				case cfgChan <- msg:
				case <-ctx.Done():
					return
				}
				last, lastETag = res.key, res.etag
			}

			switch {
			case !p.s.watch || !lastETag:
				pause = p.s.pollInterval
			case !res.changed && time.Since(started) < holdMin:
				pause = p.s.pollInterval
			}
		}

		if pause > 0 && !sleep(ctx, pause) {
			return
		}
	}
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
