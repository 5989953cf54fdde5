package traefikprovider

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/fakenode"
	"github.com/scafo/ingress/traefikprovider/localplugin"
)

// wait bounds every "this should happen" wait; nothing here takes near that long
// unless it is broken.
const wait = 5 * time.Second

// harness runs one provider, natively or under Yaegi, and collects what it emits
// and logs.
type harness struct {
	pp     localplugin.PP
	native *Provider // nil under Yaegi
	emits  chan json.Marshaler
	logs   *logBuf
}

// starter starts a provider with cfg, Provide included; it is stopped at cleanup.
type starter func(t *testing.T, cfg *Config) *harness

// forEachRuntime runs a behaviour test against the compiled package and against
// its sources under Yaegi, as Traefik runs them.
func forEachRuntime(t *testing.T, test func(t *testing.T, start starter)) {
	t.Run("native", func(t *testing.T) { test(t, startNative) })
	t.Run("yaegi", func(t *testing.T) { test(t, startYaegi) })
}

// testConfig is a configuration whose PollInterval is an hour: anything a test sees
// within seconds did not come from a timer.
func testConfig(endpoints ...string) *Config {
	c := CreateConfig()
	c.Endpoints = endpoints
	c.Token = testToken
	c.PollInterval = "1h"
	c.PollTimeout = "2s"
	c.Name = "edge-test"
	c.StateFile = "off"
	c.AppliedDelay = "0s"
	return c
}

func startNative(t *testing.T, cfg *Config) *harness {
	t.Helper()
	p, err := New(context.Background(), cfg, "plugin-scafo")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := &harness{pp: p, native: p, emits: make(chan json.Marshaler, 64), logs: &logBuf{}}
	p.logLine = h.logs.add
	h.run(t)
	return h
}

func startYaegi(t *testing.T, cfg *Config) *harness {
	t.Helper()
	h := &harness{emits: make(chan json.Marshaler, 64), logs: &logBuf{}}
	endpoints := []any{}
	for _, e := range cfg.Endpoints {
		endpoints = append(endpoints, e)
	}
	pp, err := localplugin.LoadWithYaegi(yaegiGoPath(t), map[string]any{
		"endpoints":    endpoints,
		"token":        cfg.Token,
		"tokenEnv":     cfg.TokenEnv,
		"prefer":       cfg.Prefer,
		"pollInterval": cfg.PollInterval,
		"pollTimeout":  cfg.PollTimeout,
		"watch":        cfg.Watch,
		"watchWait":    cfg.WatchWait,
		"name":         cfg.Name,
		"appliedDelay": cfg.AppliedDelay,
		"appliedProbe": cfg.AppliedProbe,
		"group":        cfg.Group,
		"stateFile":    cfg.StateFile,
	}, localplugin.YaegiOptions{
		Stdout: &lineWriter{logs: h.logs, warn: false},
		Stderr: &lineWriter{logs: h.logs, warn: true},
	})
	if err != nil {
		t.Fatalf("loading under Yaegi: %v", err)
	}
	h.pp = pp
	h.run(t)
	return h
}

func (h *harness) run(t *testing.T) {
	t.Helper()
	if err := h.pp.Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
	if err := h.pp.Provide(h.emits); err != nil {
		t.Fatalf("Provide: %v", err)
	}
	t.Cleanup(func() {
		_ = h.pp.Stop()
		if t.Failed() {
			t.Logf("provider log:\n%s", h.logs)
		}
	})
}

// next returns the next emitted configuration, failing the test after timeout.
func (h *harness) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case m := <-h.emits:
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatalf("emitted configuration does not marshal: %v", err)
		}
		return string(b)
	case <-time.After(timeout):
		t.Fatalf("no configuration emitted within %s", timeout)
		return ""
	}
}

// none fails the test if a configuration was emitted and not yet consumed.
func (h *harness) none(t *testing.T) {
	t.Helper()
	select {
	case m := <-h.emits:
		b, _ := m.MarshalJSON()
		t.Fatalf("unexpected configuration emitted: %s", b)
	default:
	}
}

// TestFirstEndpointFailingFailsOverImmediately: a first endpoint that fails, or answers
// a body that is not a configuration (never emitted), is left for the next at once,
// saying why. Which bodies are not a configuration, and what is said of each:
// TestCheckConfiguration.
func TestFirstEndpointFailingFailsOverImmediately(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		good := routerConfig("shop.example.com", "http://10.83.0.2:24417")
		answering := func(mode fakenode.Mode, raw string) func(t *testing.T) string {
			return func(t *testing.T) string {
				n := newFakeNode(t, good)
				n.RawBody = []byte(raw)
				n.SetMode(mode)
				return n.URL()
			}
		}
		cases := []struct {
			name    string
			first   func(t *testing.T) string // returns the first endpoint's URL
			timeout string
			log     string
		}{
			{name: "connection refused", first: closedURL, log: "connection refused"},
			{name: "draining", first: func(t *testing.T) string {
				n := newFakeNode(t, good)
				n.SetMode(modeDraining)
				return n.URL()
			}, log: "503 draining (Retry-After 1)"},
			{name: "token rejected", first: func(t *testing.T) string {
				n := newFakeNode(t, good)
				n.Token = "another-fleet"
				return n.URL()
			}, log: "401: ingress token rejected: unauthorized"},
			{name: "server error", first: answering(modeStatus500, ""), log: "unexpected status 500: internal"},
			{name: "connection closed without answer", first: answering(modeBroken, ""), log: "EOF"},
			{name: "no answer within the timeout", first: answering(modeHang, ""), timeout: "100ms", log: "no complete answer within 100ms"},
			{name: "truncated body", first: answering(modeTruncated, ""), log: "reading body: unexpected EOF"},
			{name: "cut-off JSON", first: answering(modeRaw, `{"http":{"routers":`), log: "not valid JSON"},
			{name: "null", first: answering(modeRaw, `null`), log: "not a JSON object"},
			{name: "HTML", first: answering(modeRaw, `<html>bad gateway</html>`), log: "not a JSON object"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				second := newFakeNode(t, good)
				cfg := testConfig(tc.first(t), second.URL())
				if tc.timeout != "" {
					cfg.PollTimeout = tc.timeout
				}
				h := start(t, cfg)

				if got := h.next(t, wait); got != good {
					t.Fatalf("emitted %s, want the second node's configuration %s", got, good)
				}
				if h.logs.count("switching to "+second.URL()) != 1 {
					t.Errorf("switch to the second endpoint not logged once; log:\n%s", h.logs)
				}
				if tc.log != "" && h.logs.count(tc.log) == 0 {
					t.Errorf("log does not mention %q; log:\n%s", tc.log, h.logs)
				}
			})
		}
	})
}

func TestSticksToTheEndpointThatAnswered(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		body := routerConfig("shop.example.com", "http://10.83.0.2:24417")
		first, second := newFakeNode(t, body), newFakeNode(t, body)
		first.SetMode(modeDraining)

		cfg := testConfig(first.URL(), second.URL())
		cfg.Watch = false
		cfg.PollInterval = "5ms"
		h := start(t, cfg)
		if got := h.next(t, wait); got != body {
			t.Fatalf("emitted %s, want %s", got, body)
		}

		// The first node recovers; the provider must stay on the second.
		first.SetMode(fakenode.Serve)
		before := len(second.Requests())
		second.WaitFor(t, "five more polls at the second node", wait, func(n *fakeNode) bool {
			return len(n.Reqs) >= before+5
		})
		if got := len(first.Requests()); got != 1 {
			t.Errorf("first node saw %d requests after the switch, want only the initial 1", got)
		}
		h.none(t)
	})
}

// TestUnchangedRevisionIsNotEmittedAgain: with watch off, polls are conditional (no
// wait), and neither their 304s nor a node that answers 200 whatever If-None-Match says
// emit anything; nor does a failover to a node at the same revision.
func TestUnchangedRevisionIsNotEmittedAgain(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		body := routerConfig("shop.example.com", "http://10.83.0.2:24417")

		for _, ignoreINM := range []bool{false, true} {
			t.Run(map[bool]string{false: "304", true: "node ignores If-None-Match"}[ignoreINM], func(t *testing.T) {
				node := newFakeNode(t, body)
				node.IgnoreINM = ignoreINM
				cfg := testConfig(node.URL())
				cfg.Watch = false
				cfg.PollInterval = "5ms"
				h := start(t, cfg)
				if got := h.next(t, wait); got != body {
					t.Fatalf("emitted %s, want %s", got, body)
				}
				node.WaitFor(t, "five answered polls after the first", wait, func(n *fakeNode) bool {
					return len(n.Reqs) >= 6 && n.Reqs[5].Status != 0
				})
				h.none(t)
				for i, r := range node.Requests()[1:] {
					if want := map[bool]int{false: 304, true: 200}[ignoreINM]; r.IfNoneMatch != etagOf(body) || r.Wait != "" || (i < 5 && r.Status != want) {
						t.Errorf("poll %d: If-None-Match %q wait %q status %d; want a conditional poll without wait answered %d", i+1, r.IfNoneMatch, r.Wait, r.Status, want)
					}
				}
			})
		}

		t.Run("failover to a node at the same revision", func(t *testing.T) {
			first, second := newFakeNode(t, body), newFakeNode(t, body)
			h := start(t, testConfig(first.URL(), second.URL()))
			if got := h.next(t, wait); got != body {
				t.Fatalf("emitted %s, want %s", got, body)
			}
			first.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })

			first.SetMode(modeBroken)
			first.Srv.CloseClientConnections()
			second.WaitFor(t, "a held long-poll at the second node", wait, func(n *fakeNode) bool {
				return n.Waiting == 1
			})
			if got := second.Requests()[0].IfNoneMatch; got != etagOf(body) {
				t.Errorf("second node asked with If-None-Match %q, want %q", got, etagOf(body))
			}
			h.none(t)
		})
	})
}

func TestLongPollDeliversChangeAtOnce(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		node := newFakeNode(t, routerConfig("shop.example.com", "http://10.83.0.1:24417"))
		cfg := testConfig(node.URL())
		cfg.Prefer = "vps-a"
		h := start(t, cfg)
		h.next(t, wait)

		var latencies []time.Duration
		for i := 0; i < 5; i++ {
			node.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })
			body := routerConfig("shop.example.com", "http://10.83.0.2:"+string(rune('0'+i)))
			changed := time.Now()
			node.SetBody(body)
			if got := h.next(t, wait); got != body {
				t.Fatalf("flip %d: emitted %s, want %s", i, got, body)
			}
			latencies = append(latencies, time.Since(changed))
		}
		sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
		t.Logf("change → emit latencies: %v", latencies)
		if p50 := latencies[len(latencies)/2]; p50 > 100*time.Millisecond {
			t.Errorf("median change → emit latency %s, want under 100ms", p50)
		}

		reqs := node.Requests()
		if reqs[0].IfNoneMatch != "" || reqs[0].Wait != "" {
			t.Errorf("first request If-None-Match %q wait %q, want a plain GET", reqs[0].IfNoneMatch, reqs[0].Wait)
		}
		for i, r := range reqs {
			if r.Auth != "Bearer "+testToken {
				t.Errorf("request %d Authorization %q", i, r.Auth)
			}
			if r.Prefer != "vps-a" {
				t.Errorf("request %d prefer %q, want vps-a", i, r.Prefer)
			}
			if i > 0 && (r.Wait != "30s" || r.IfNoneMatch == "") {
				t.Errorf("request %d wait %q If-None-Match %q, want a long-poll", i, r.Wait, r.IfNoneMatch)
			}
		}
	})
}

func TestWatchAgainstNodeThatDoesNotHoldDoesNotSpin(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		body := routerConfig("shop.example.com", "http://10.83.0.1:24417")
		node := newFakeNode(t, body)
		node.IgnoreWait = true
		cfg := testConfig(node.URL())
		cfg.PollInterval = "30ms"
		h := start(t, cfg)
		h.next(t, wait)

		node.WaitFor(t, "five requests", wait, func(n *fakeNode) bool { return len(n.Reqs) >= 5 })
		reqs := node.Requests()
		for i := 2; i < 5; i++ {
			if gap := reqs[i].At.Sub(reqs[i-1].At); gap < 30*time.Millisecond {
				t.Errorf("request %d came %s after the previous 304, want at least pollInterval 30ms", i, gap)
			}
		}
		h.none(t)
	})
}

func TestKeepsLastConfigurationWhileEveryEndpointFails(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		first := routerConfig("shop.example.com", "http://10.83.0.1:24417")
		a, b := newFakeNode(t, first), newFakeNode(t, first)
		cfg := testConfig(a.URL(), b.URL())
		cfg.PollInterval = "10ms"
		h := start(t, cfg)
		if got := h.next(t, wait); got != first {
			t.Fatalf("emitted %s, want %s", got, first)
		}
		a.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })

		b.SetMode(modeDraining)
		a.SetMode(modeBroken)
		a.Srv.CloseClientConnections()
		for _, n := range []*fakeNode{a, b} {
			n.WaitFor(t, "three failed attempts", wait, func(n *fakeNode) bool {
				c := 0
				for _, r := range n.Reqs {
					if r.Status == -1 || r.Status == 503 {
						c++
					}
				}
				return c >= 3
			})
		}
		h.none(t)
		if got := h.logs.count("all 2 endpoints failed; keeping the last configuration (" + etagOf(first) + ")"); got != 1 {
			t.Errorf("outage summary logged %d times, want once; log:\n%s", got, h.logs)
		}

		// The fleet comes back with a new revision.
		second := routerConfig("shop.example.com", "http://10.83.0.2:24417")
		b.SetBody(second)
		b.SetMode(fakenode.Serve)
		if got := h.next(t, wait); got != second {
			t.Fatalf("after recovery emitted %s, want %s", got, second)
		}
		if h.logs.count(b.URL()+" answered; polling resumed") != 1 {
			t.Errorf("recovery not logged; log:\n%s", h.logs)
		}
	})
}

func TestNothingIsEmittedWhileNoEndpointEverAnswered(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		a := newFakeNode(t, "{}")
		a.SetMode(modeDraining)
		cfg := testConfig(a.URL(), closedURL(t))
		cfg.PollInterval = "5ms"
		h := start(t, cfg)

		a.WaitFor(t, "five draining answers", wait, func(n *fakeNode) bool { return len(n.Reqs) >= 5 })
		h.none(t)
		if h.logs.count("no configuration received yet") == 0 {
			t.Errorf("outage summary missing; log:\n%s", h.logs)
		}
	})
}

func TestBacksOffAfterEveryEndpointFailed(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		a, b := newFakeNode(t, "{}"), newFakeNode(t, "{}")
		a.SetMode(modeDraining)
		b.SetMode(modeDraining)
		cfg := testConfig(a.URL(), b.URL())
		cfg.PollInterval = "40ms"
		start(t, cfg)

		b.WaitFor(t, "three attempts at the second node", wait, func(n *fakeNode) bool { return len(n.Reqs) >= 3 })
		var times []time.Time
		for _, n := range []*fakeNode{a, b} {
			for _, r := range n.Requests() {
				times = append(times, r.At)
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		// Attempt 0 (first node) and 1 (second, immediately) are free; every later
		// attempt waits pollInterval.
		for i := 2; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < 40*time.Millisecond {
				t.Errorf("attempt %d came %s after the previous one, want at least pollInterval 40ms", i, gap)
			}
		}
	})
}

func TestTruncatedUpdateKeepsLastGoodConfiguration(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		first := routerConfig("shop.example.com", "http://10.83.0.1:24417")
		node := newFakeNode(t, first)
		cfg := testConfig(node.URL())
		cfg.PollInterval = "5ms"
		h := start(t, cfg)
		if got := h.next(t, wait); got != first {
			t.Fatalf("emitted %s, want %s", got, first)
		}
		node.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })

		node.SetMode(modeTruncated)
		node.SetBody(routerConfig("shop.example.com", "http://10.83.0.2:24417"))
		node.WaitFor(t, "three truncated answers", wait, func(n *fakeNode) bool { return len(n.Reqs) >= 4 })
		h.none(t)

		third := routerConfig("shop.example.com", "http://10.83.0.3:24417")
		node.SetBody(third)
		node.SetMode(fakenode.Serve)
		if got := h.next(t, wait); got != third {
			t.Fatalf("emitted %s, want %s", got, third)
		}
	})
}

func TestEmptyConfigurationIsEmittedWithEmptyMaps(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		node := newFakeNode(t, `{}`)
		h := start(t, testConfig(node.URL()))
		want := `{"http":{"routers":{},"services":{}}}`
		if got := h.next(t, wait); got != want {
			t.Fatalf("emitted %s, want %s", got, want)
		}
	})
}

func TestStopReturnsPromptly(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		body := routerConfig("shop.example.com", "http://10.83.0.1:24417")
		cases := []struct {
			name  string
			setup func(t *testing.T, n *fakeNode) *Config
			ready func(t *testing.T, h *harness, n *fakeNode)
		}{
			{
				name:  "during a long-poll",
				setup: func(t *testing.T, n *fakeNode) *Config { return testConfig(n.URL()) },
				ready: func(t *testing.T, h *harness, n *fakeNode) {
					h.next(t, wait)
					n.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })
				},
			},
			{
				name: "during a request that hangs",
				setup: func(t *testing.T, n *fakeNode) *Config {
					n.SetMode(modeHang)
					c := testConfig(n.URL())
					c.PollTimeout = "1h"
					return c
				},
				ready: func(t *testing.T, h *harness, n *fakeNode) {
					n.WaitFor(t, "a request", wait, func(n *fakeNode) bool { return len(n.Reqs) == 1 })
				},
			},
			{
				name: "during the back-off",
				setup: func(t *testing.T, n *fakeNode) *Config {
					n.SetMode(modeDraining)
					return testConfig(n.URL())
				},
				ready: func(t *testing.T, h *harness, n *fakeNode) {
					n.WaitFor(t, "a draining answer", wait, func(n *fakeNode) bool {
						return len(n.Reqs) == 1 && n.Reqs[0].Status == 503
					})
				},
			},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				node := newFakeNode(t, body)
				h := start(t, tc.setup(t, node))
				tc.ready(t, h, node)

				stopped := make(chan error, 1)
				began := time.Now()
				go func() { stopped <- h.pp.Stop() }()
				select {
				case err := <-stopped:
					if err != nil {
						t.Fatalf("Stop: %v", err)
					}
				case <-time.After(wait):
					t.Fatalf("Stop did not return within %s", wait)
				}
				t.Logf("Stop took %s", time.Since(began))

				if h.native != nil {
					select {
					case <-h.native.done:
					default:
						t.Fatal("Stop returned before the polling goroutine exited")
					}
				}
				if tc.name != "during the back-off" {
					node.WaitFor(t, "the held request to be cancelled", wait, func(n *fakeNode) bool {
						return n.Cancelled == 1
					})
				}
				seen := len(node.Requests())
				if err := h.pp.Stop(); err != nil {
					t.Fatalf("second Stop: %v", err)
				}
				if got := len(node.Requests()); got != seen {
					t.Errorf("%d requests after Stop", got-seen)
				}
			})
		}
	})
}

func TestStopBeforeProvideIsANoOp(t *testing.T) {
	p, err := New(context.Background(), testConfig("http://127.0.0.1:1"), "plugin-scafo")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop before Provide: %v", err)
	}
}

func TestProvideTwiceIsAnError(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		node := newFakeNode(t, "{}")
		h := start(t, testConfig(node.URL()))
		err := h.pp.Provide(make(chan json.Marshaler))
		if err == nil || !strings.Contains(err.Error(), "already started") {
			t.Fatalf("second Provide: %v, want an already-started error", err)
		}
	})
}
