package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/routing"
)

const testProbeURL = "http://127.0.0.1:18080"

// readCountingStore counts every request made to the store.
type readCountingStore struct {
	store.Store
	ops atomic.Int64
}

func (s *readCountingStore) Get(ctx context.Context, key string) (store.Object, error) {
	s.ops.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *readCountingStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.ops.Add(1)
	return s.Store.List(ctx, prefix)
}

func (s *readCountingStore) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	s.ops.Add(1)
	return s.Store.Put(ctx, key, v, c)
}

// probePoll is one poll of an HTTP-provider Traefik that declares its applied probe:
// the answer, its revision and serial, and the callback path the body carries ("" for
// none).
func probePoll(t *testing.T, n *testNode, name string) (resp *http.Response, body []byte, callback string) {
	t.Helper()
	resp, body = n.Get("/v1/ingress/traefik?prefer=self", testIngressToken, api.HeaderIngress, name, api.HeaderAppliedProbe, testProbeURL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("probe poll: %d %s", resp.StatusCode, body)
	}
	return resp, body, callbackOf(t, body)
}

// ruleOf is the callback router's rule in body ("" without one).
func ruleOf(body []byte) string {
	var cfg struct {
		HTTP struct {
			Routers map[string]struct {
				Rule string `json:"rule"`
			} `json:"routers"`
		} `json:"http"`
	}
	json.Unmarshal(body, &cfg)
	return cfg.HTTP.Routers["applied-callback"].Rule
}

var callbackRule = regexp.MustCompile("^Host\\(`scafo-applied\\.invalid`\\) && Path\\(`([^`]+)`\\)$")

// callbackOf is the callback path of a body ("" without the probe), checked against
// the check service's health-check path.
func callbackOf(t *testing.T, body []byte) string {
	t.Helper()
	var cfg struct {
		HTTP struct {
			Routers map[string]struct {
				Rule    string `json:"rule"`
				Service string `json:"service"`
			} `json:"routers"`
			Services map[string]struct {
				LoadBalancer struct {
					Servers     []struct{ URL string } `json:"servers"`
					HealthCheck *struct {
						Path     string `json:"path"`
						Hostname string `json:"hostname"`
					} `json:"healthCheck"`
				} `json:"loadBalancer"`
			} `json:"services"`
		} `json:"http"`
	}
	if err := json.Unmarshal(body, &cfg); err != nil {
		t.Fatal(err)
	}
	r, ok := cfg.HTTP.Routers["applied-callback"]
	if !ok {
		return ""
	}
	m := callbackRule.FindStringSubmatch(r.Rule)
	if m == nil {
		t.Fatalf("callback rule %q", r.Rule)
	}
	check := cfg.HTTP.Services["applied-check"].LoadBalancer
	if check.HealthCheck == nil || check.HealthCheck.Path != m[1] || check.HealthCheck.Hostname != render.AppliedHost ||
		len(check.Servers) != 1 || check.Servers[0].URL != testProbeURL {
		t.Fatalf("check service %+v does not check the callback path %s at %s", check, m[1], testProbeURL)
	}
	return m[1]
}

// TestAppliedProbeIsValidated: a malformed X-Scafo-Applied-Probe, or one that cannot
// apply, is 400 naming the field, never ignored (an ingress that asked for a true
// "applied" and silently got "served" would let deploys stop old processes early).
func TestAppliedProbeIsValidated(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	for _, tc := range []struct {
		path, token string
		hdr         []string
		field       string
	}{
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "ftp://127.0.0.1:80"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "http://127.0.0.1:80/x"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "http://u:p@127.0.0.1:80"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "127.0.0.1:80"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "http://127.0.0.1:99999"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderAppliedProbe, testProbeURL}, api.HeaderIngress},
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderIngress, "Edge_P", api.HeaderAppliedProbe, testProbeURL}, api.HeaderIngress},
		{"/v1/ingress/traefik", testIngressToken, []string{api.HeaderIngress, "edge-p", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedProbe, testProbeURL}, "plugin"},
		{"/v1/ingress/routes", testIngressToken, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, testProbeURL}, "only on"},
		{"/v1/ingress/traefik", testAdminToken, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, testProbeURL}, "admin"},
	} {
		resp, body := n.Get(tc.path, tc.token, tc.hdr...)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.field) {
			t.Errorf("%s %v: %d %s, want 400 naming %s", tc.path, tc.hdr, resp.StatusCode, body, tc.field)
		}
	}
	// Given twice.
	req, _ := http.NewRequest("GET", n.URL+"/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+testIngressToken)
	req.Header.Set(api.HeaderIngress, "edge-p")
	req.Header.Add(api.HeaderAppliedProbe, testProbeURL)
	req.Header.Add(api.HeaderAppliedProbe, testProbeURL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("the probe header twice: %d, want 400", resp.StatusCode)
	}
	// A valid one: the body carries the probe, the callback goes to the node as polled.
	_, body, cb := probePoll(t, n, "edge-p")
	if cb == "" || !strings.HasPrefix(cb, api.PathIngressApplied+"edge-p/") {
		t.Fatalf("callback path %q", cb)
	}
	if !strings.Contains(string(body), `"url":"`+n.URL+`"`) {
		t.Errorf("the callback service does not reach the node as polled (%s)", n.URL)
	}
	// Without the header: the same document's body, no probe.
	_, plain := n.Get("/v1/ingress/traefik?prefer=self", testIngressToken, api.HeaderIngress, "edge-q")
	if callbackOf(t, plain) != "" {
		t.Error("a poll without the probe header got the probe")
	}
}

// TestHTTPProviderWithAProbeIsAppliedOnlyByItsCallback: an HTTP-provider Traefik that
// declares its probe is behind for ?wait=applied, however often it is served the write,
// until its callback for a body holding the write comes; the callback answers the
// waiting write. Before, the node counted what it served (early by seconds at 10 000
// applications, issue 24).
func TestHTTPProviderWithAProbeIsAppliedOnlyByItsCallback(t *testing.T) {
	t.Parallel()
	n := startNode(t, reportsConfig(t, "vps-a", t.TempDir()))
	n.WaitReady()
	_, _, cb0 := probePoll(t, n, "edge-p")
	probePoll(t, n, "edge-p")
	if in := ingressesOf(t, n)["edge-p"]; in.Kind != api.KindHTTP || in.Applied == nil || in.Applied.Serial != 0 || in.State != "behind" {
		t.Fatalf("served twice, no callback: %+v, want behind with nothing applied", in)
	}
	resp, _ := n.Get(cb0, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d", resp.StatusCode)
	}
	waitFor(t, 2*time.Second, "edge-p current after its callback", func() bool {
		return ingressesOf(t, n)["edge-p"].State == "current"
	})

	// A write waits while the ingress is served it (a poller every 50 ms) but does not
	// call back: 202 naming it.
	polled := make(chan string, 1000)
	stopPolling := probePoller(t, n, "prefer=self", "edge-p", func(b []byte) {
		if m := callbackRule.FindStringSubmatch(ruleOf(b)); m != nil {
			select {
			case polled <- m[1]:
			default:
			}
		}
	})
	defer stopPolling()
	resp, body := n.Do(http.MethodPut, "/v1/apps/shop?wait=applied&timeout=1500ms", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "edge-p") {
		t.Fatalf("served but not applied: %d %s, want 202 naming edge-p", resp.StatusCode, body)
	}
	var ab api.Applied
	json.Unmarshal(body, &ab)
	if in := ingressesOf(t, n)["edge-p"]; in.State != "behind" {
		t.Fatalf("served the write, no callback: %+v, want behind", in)
	}
	// The callback of the body holding the write (its revision) moves it to applied.
	var cb1 string
	waitFor(t, 3*time.Second, "a body of the new revision served", func() bool {
		for {
			select {
			case c := <-polled:
				if c != cb0 && c != "" {
					cb1 = c
				}
				continue
			default:
			}
			return cb1 != ""
		}
	})
	// A write waiting now answers 200 once, and only once, the callback came.
	type answer struct {
		code int
		body []byte
		at   time.Time
	}
	done := make(chan answer, 1)
	go func() {
		resp, body := n.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=10s", testAdminToken, `{"account":"acme","placement":["vps-a"]}`)
		done <- answer{resp.StatusCode, body, time.Now()}
	}()
	// That write moves the revision again: take the body that holds it.
	var cb2 string
	waitFor(t, 3*time.Second, "a body of the second write served", func() bool {
		for {
			select {
			case c := <-polled:
				if c != cb0 && c != cb1 && c != "" {
					cb2 = c
				}
				continue
			default:
			}
			return cb2 != ""
		}
	})
	select {
	case a := <-done:
		t.Fatalf("the write answered %d %s before any callback of its body", a.code, a.body)
	case <-time.After(700 * time.Millisecond):
	}
	// The older body's callback (Traefik applying cb1 late) counts forward, but does
	// not hold the second write.
	if resp, b := n.Get(cb1, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "recorded") {
		t.Fatalf("callback of an older served body: %d %s, want 200 recorded", resp.StatusCode, b)
	}
	select {
	case a := <-done:
		t.Fatalf("the write answered %d %s on the callback of an older body", a.code, a.body)
	case <-time.After(500 * time.Millisecond):
	}
	called := time.Now()
	if resp, b := n.Get(cb2, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "recorded") {
		t.Fatalf("callback: %d %s", resp.StatusCode, b)
	}
	select {
	case a := <-done:
		if a.code != http.StatusOK || a.at.Before(called) {
			t.Fatalf("the write answered %d %s at %s, callback at %s", a.code, a.body, a.at, called)
		}
		t.Logf("answered applied %s after the callback", a.at.Sub(called))
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not answer after the callback")
	}
	applied := ingressesOf(t, n)["edge-p"].Applied
	// Replays of older callbacks never move it back.
	for _, cb := range []string{cb0, cb1, cb0} {
		if resp, b := n.Get(cb, ""); resp.StatusCode != http.StatusOK || strings.Contains(string(b), "recorded") {
			t.Errorf("replayed callback %s: %d %s, want 200, not recorded", cb, resp.StatusCode, b)
		}
	}
	if got := ingressesOf(t, n)["edge-p"].Applied; got == nil || got.Revision != applied.Revision || got.Serial < applied.Serial {
		t.Errorf("after replays: applied %+v, want still %+v", got, applied)
	}
}

// TestForgedAppliedCallbacksAreRefusedForNothing: a callback whose MAC does not verify
// (made up, another ingress's, another revision's) is 404, records nothing and costs no
// store request; the callback path is never routed by the public apex.
func TestForgedAppliedCallbacksAreRefusedForNothing(t *testing.T) {
	t.Parallel()
	cfg := reportsConfig(t, "vps-a", t.TempDir())
	st := &readCountingStore{Store: openDir(t, cfg.Store.Dir.Path)}
	n := startNodeWithStore(t, cfg, st)
	n.WaitReady()
	_, _, cb := probePoll(t, n, "edge-p")
	parts := strings.Split(strings.TrimPrefix(cb, api.PathIngressApplied), "/")
	if len(parts) != 3 {
		t.Fatalf("callback %q", cb)
	}
	name, rev, mac := parts[0], parts[1], parts[2]
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == '0' {
			b[0] = '1'
		} else {
			b[0] = '0'
		}
		return string(b)
	}
	forged := []string{
		api.PathIngressApplied + name + "/" + rev + "/" + flip(mac),
		api.PathIngressApplied + "edge-q/" + rev + "/" + mac,
		api.PathIngressApplied + name + "/" + flip(rev) + "/" + mac,
		api.PathIngressApplied + name + "/" + rev + "/" + mac[:16],
		api.PathIngressApplied + name + "/" + rev + "/" + strings.Repeat("0", len(mac)),
	}
	time.Sleep(300 * time.Millisecond) // let the report write of the poll settle
	before := st.ops.Load()
	for i := range 400 {
		p := forged[i%len(forged)]
		resp, b := n.Get(p, "")
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"error"`) {
			t.Fatalf("forged %s: %d %s, want 404 JSON", p, resp.StatusCode, b)
		}
	}
	if got := st.ops.Load() - before; got > 2 {
		t.Errorf("400 forged callbacks made %d store requests", got)
	}
	if in := ingressesOf(t, n)["edge-p"]; in.Applied == nil || in.Applied.Serial != 0 {
		t.Errorf("after forged callbacks: %+v, want nothing applied", in)
	}
	// The real one is recorded.
	if resp, b := n.Get(cb, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "recorded") {
		t.Errorf("the real callback: %d %s", resp.StatusCode, b)
	}
	// Never through the public apex.
	found := false
	for _, d := range routing.DeniedAPIPrefixes {
		found = found || strings.HasPrefix(api.PathIngressApplied, d)
	}
	if !found {
		t.Errorf("%s is not under a denied apex prefix", api.PathIngressApplied)
	}
}

// TestAppliedProbeBodiesAreStableAndCached: the body of one (state, ingress, probe) is
// the same bytes on every poll and from a second node of the fleet, is rendered once
// per revision, and only its probe's objects differ from the plain body.
func TestAppliedProbeBodiesAreStableAndCached(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	a := startNode(t, reportsConfig(t, "vps-a", storeDir))
	a.WaitReady()
	b := startNode(t, reportsConfig(t, "vps-b", storeDir))
	b.WaitReady()
	seedFleet(t, a.St, "shop")
	waitFor(t, 5*time.Second, "both nodes on one revision", func() bool {
		ra, _ := a.Get("/v1/ingress/traefik", testIngressToken)
		rb, _ := b.Get("/v1/ingress/traefik", testIngressToken)
		return ra.Header.Get(api.HeaderRevision) == rb.Header.Get(api.HeaderRevision)
	})
	poll := func(n *testNode) []byte {
		// Both nodes reached at one name, as behind one local address.
		_, body := n.Get("/v1/ingress/traefik", testIngressToken, api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, testProbeURL)
		return body
	}
	first := poll(a)
	renders := a.Srv.Pub().Renders()
	for range 5 {
		if got := poll(a); string(got) != string(first) {
			t.Fatal("two polls of one state got different probe bodies")
		}
	}
	if r := a.Srv.Pub().Renders() - renders; r != 0 {
		t.Errorf("5 polls of one state rendered %d bodies, want 0 (cached)", r)
	}
	// From vps-b (another URL: its callback service differs in that one URL alone).
	other := strings.ReplaceAll(string(poll(b)), b.URL, a.URL)
	if other != string(first) {
		t.Error("vps-b's probe body differs from vps-a's beyond the node URL")
	}
	_, plain := a.Get("/v1/ingress/traefik", testIngressToken)
	if callbackOf(t, plain) != "" || len(plain) >= len(first) {
		t.Error("the plain body carries the probe")
	}
}

// probePoller polls n's Traefik render as ingress with the applied probe every 50 ms
// (query: the poll's query string), handing each 200's body to onBody (nil: ignored)
// and never calling back, until the returned stop, which waits for the poller to end.
func probePoller(t *testing.T, n *testNode, query, ingress string, onBody func([]byte)) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			req, _ := http.NewRequest("GET", n.URL+"/v1/ingress/traefik?"+query, nil)
			req.Header.Set("Authorization", "Bearer "+testIngressToken)
			req.Header.Set(api.HeaderIngress, ingress)
			req.Header.Set(api.HeaderAppliedProbe, testProbeURL)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode == http.StatusOK && onBody != nil {
				onBody(b)
			}
		}
	}()
	return func() { close(done); <-exited }
}
