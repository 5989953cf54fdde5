package traefikprovider

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// entrypoint stands in for a Traefik entrypoint: it serves the probe path of the
// configuration the test has "applied" (noop's 418) and 404 otherwise, and counts the
// probes. What it serves is set by the test, so nothing here depends on timing: the
// real Traefik is in e2e (TestPluginAppliedProbe…) and e2e/bench.
type entrypoint struct {
	srv *httptest.Server

	mu      sync.Mutex
	serving string // path of the probe router "applied"; "" for none
	probes  map[string]int
	hosts   map[string]bool
}

func newEntrypoint(t *testing.T) *entrypoint {
	e := &entrypoint{probes: map[string]int{}, hosts: map[string]bool{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.probes[r.URL.Path]++
		e.hosts[r.Host] = true
		if r.Host == probeHost && r.URL.Path == e.serving {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *entrypoint) apply(path string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serving = path
}

func (e *entrypoint) count(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.probes[path]
}

var probeRuleRE = regexp.MustCompile("^Host\\(`scafo-applied\\.invalid`\\) && Path\\(`(/[0-9a-f]{32}/[0-9]+)`\\)$")

// probeOf checks the probe router of an emitted configuration and returns its path and
// the configuration without it.
func probeOf(t *testing.T, emitted string) (path string, rest map[string]any) {
	t.Helper()
	if err := json.Unmarshal([]byte(emitted), &rest); err != nil {
		t.Fatal(err)
	}
	routers := rest["http"].(map[string]any)["routers"].(map[string]any)
	r, ok := routers[probeRouter].(map[string]any)
	if !ok {
		t.Fatalf("no %s router in %s", probeRouter, emitted)
	}
	m := probeRuleRE.FindStringSubmatch(r["rule"].(string))
	if m == nil || r["service"] != "noop@internal" || r["priority"] != float64(probePriority) || len(r) != 3 {
		t.Fatalf("probe router %v, want rule Host(scafo-applied.invalid) && Path(/<nonce>/<gen>), noop@internal, priority %d", r, probePriority)
	}
	delete(routers, probeRouter)
	return m[1], rest
}

func sameJSON(t *testing.T, got map[string]any, want string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if string(g) != string(wb) {
		t.Errorf("configuration besides the probe router:\n got %s\nwant %s", g, wb)
	}
}

// Issue 24 item 1: with appliedProbe, "applied" is what this Traefik serves, not a
// delay. The plugin adds a probe router to each configuration it hands over, reports
// nothing applied while the entrypoint does not serve that router (however long), and
// reports the configuration on its next poll once it does; a second configuration gets
// a router of its own, and the first one's still being served does not count for it.
// The state file keeps the node's configuration, without the router.
func TestAppliedProbeReportsOnlyWhatTraefikServes(t *testing.T) {
	forEachRuntime(t, func(t *testing.T, start starter) {
		const epoch = "0123456789abcdef"
		first := routerConfig("shop.example.com", "http://10.83.0.1:24417")
		node := newFakeNode(t, first)
		node.SetBodySerial(first, 7, epoch)
		ep := newEntrypoint(t)
		cfg := testConfig(node.URL())
		cfg.AppliedProbe = ep.srv.URL
		cfg.AppliedDelay = "0s" // ignored with the probe: a delay would report at once
		cfg.StateFile = filepath.Join(t.TempDir(), "scafo.last.json")
		h := start(t, cfg)

		p1, rest := probeOf(t, h.next(t, wait))
		sameJSON(t, rest, first)
		// Probed again and again, never served: no poll reports serial 7.
		waitUntil(t, "five probes of the first configuration", func() bool { return ep.count(p1) >= 5 })
		for _, r := range node.Requests() {
			if r.AppliedSerial != "" {
				t.Fatalf("a poll reported serial %q applied before Traefik served it", r.AppliedSerial)
			}
		}
		polls := len(node.Requests())
		ep.apply(p1)
		node.WaitFor(t, "a poll reporting serial 7", wait, func(n *fakeNode) bool {
			return n.Reqs[len(n.Reqs)-1].AppliedSerial == "7"
		})
		if got := len(node.Requests()) - polls; got != 1 {
			t.Errorf("%d polls from the probe seeing the configuration to the report, want 1 (the report is the next poll)", got)
		}
		if st := readSaved(t, cfg.StateFile); string(st.Config) != first {
			t.Errorf("state file holds %s, want the node's configuration without the probe router", st.Config)
		}

		// A second configuration: a new path; the entrypoint still serving the first
		// one's router does not make it applied.
		node.WaitFor(t, "a held long-poll", wait, func(n *fakeNode) bool { return n.Waiting == 1 })
		second := routerConfig("shop.example.com", "http://10.83.0.2:24417")
		node.SetBodySerial(second, 9, epoch)
		p2, rest := probeOf(t, h.next(t, wait))
		sameJSON(t, rest, second)
		if p2 == p1 || strings.Split(p2, "/")[1] != strings.Split(p1, "/")[1] {
			t.Fatalf("second probe path %s, first %s: want the same nonce and another generation", p2, p1)
		}
		waitUntil(t, "five probes of the second configuration", func() bool { return ep.count(p2) >= 5 })
		for _, r := range node.Requests() {
			if r.AppliedSerial == "9" {
				t.Fatal("serial 9 reported applied while Traefik served the first configuration")
			}
		}
		ep.apply(p2)
		node.WaitFor(t, "a poll reporting serial 9", wait, func(n *fakeNode) bool {
			last := n.Reqs[len(n.Reqs)-1]
			return last.AppliedSerial == "9" && last.AppliedRevision == revisionOf(second)
		})
		ep.mu.Lock()
		defer ep.mu.Unlock()
		if len(ep.hosts) != 1 || !ep.hosts[probeHost] {
			t.Errorf("probes sent with hosts %v, want only %s", ep.hosts, probeHost)
		}
	})
}

// Two starts use two nonces: a path learnt from one start (a log, a leaked config) does
// not name the next one's router.
func TestAppliedProbeNonceIsPerStart(t *testing.T) {
	a, err := newProber("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := newProber("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if a.path(1) == b.path(1) || len(a.nonce) != 32 {
		t.Errorf("paths %s and %s: want two random 128-bit nonces", a.path(1), b.path(1))
	}
	// A configuration that already names the router is refused, not overwritten.
	if _, err := a.withRouter([]byte(`{"http":{"routers":{"`+probeRouter+`":{"rule":"Host(`+"`x`"+`)","service":"s"}}}}`), 1); err == nil {
		t.Error("a configuration already holding the probe router: no error")
	}
	// A configuration without http (TLS only) gets the router.
	out, err := a.withRouter([]byte(`{"tls":{"certificates":[]}}`), 2)
	if err != nil || !strings.Contains(string(out), `"tls":{"certificates":[]}`) || !strings.Contains(string(out), a.path(2)) {
		t.Errorf("TLS-only configuration: %s %v", out, err)
	}
}
