package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/fleetwrite"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// The applied probe's door, in process: what a poll declaring it must hold, and the
// callback's one spelling. (testnode is used for the probe body's parser and the probe
// URL only: no node is started.)

// probePoll is one poll of an HTTP-provider Traefik that declares its applied probe:
// the answer, its body, and the callback path the body carries ("" for none).
func (p *inProcess) probePoll(t *testing.T, name string) (resp *http.Response, body []byte, callback string) {
	t.Helper()
	resp, body = p.Get("/v1/ingress/traefik?prefer=self", ipIngress, api.HeaderIngress, name, api.HeaderAppliedProbe, testnode.ProbeURL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("probe poll: %d %s", resp.StatusCode, body)
	}
	return resp, body, testnode.CallbackOf(t, body)
}

// TestForgedAppliedCallbacksAreRefusedForNothing: a poll declaring its applied probe
// (its refusals are pollCases' rows) gets a body carrying the probe, whose callback goes
// to the node as polled; a poll without it gets none. A callback whose MAC does not
// verify (made up, another ingress's, another revision's) or a respelling of the real
// one is 404, records nothing and costs no store request. The MAC is lowercase hex of
// one length over the ingress and revision exactly as served: an upper-case MAC, name or
// revision, a percent-encoded segment (chi routes on the raw path), the full 64-hex
// HMAC, a longer or shorter MAC, a trailing slash, an extra or a doubled segment are no
// callback; a query string is not part of the path (the same callback). The real one is
// recorded, a replay is "already", and HEAD answers as GET. (The public apex never routes
// the callback: TestTheStatusPageAndTheIngressRoutesAreNeverRoutedOnThePublicApex.)
func TestForgedAppliedCallbacksAreRefusedForNothing(t *testing.T) {
	t.Parallel()
	n, st := countedAPI(t, "")
	_, body, cb := n.probePoll(t, "edge-p")
	if cb == "" || !strings.HasPrefix(cb, api.PathIngressApplied+"edge-p/") {
		t.Fatalf("callback path %q", cb)
	}
	if !strings.Contains(string(body), `"url":"http://127.0.0.1"`) {
		t.Errorf("the callback service does not reach the node as polled (http://127.0.0.1)")
	}
	if _, plain := n.Get("/v1/ingress/traefik?prefer=self", ipIngress, api.HeaderIngress, "edge-q"); testnode.CallbackOf(t, plain) != "" {
		t.Error("a poll without the probe header got the probe")
	}
	parts := strings.Split(strings.TrimPrefix(cb, api.PathIngressApplied), "/")
	if len(parts) != 3 {
		t.Fatalf("callback %q", cb)
	}
	name, rev, mac := parts[0], parts[1], parts[2]
	p := func(n, r, m string) string { return api.PathIngressApplied + n + "/" + r + "/" + m }
	flip := func(s string) string {
		if s[0] == '0' {
			return "1" + s[1:]
		}
		return "0" + s[1:]
	}
	refused := []string{
		p(name, rev, flip(mac)), p("edge-q", rev, mac), p(name, flip(rev), mac), p(name, rev, mac[:16]), p(name, rev, strings.Repeat("0", len(mac))),
		p(name, rev, strings.ToUpper(mac)), p(strings.ToUpper(name), rev, mac), p(name, strings.ToUpper(rev), mac),
		p("%65"+name[1:], rev, mac),
		p(name, "%"+strings.ToUpper(hexOf(rev[0]))+rev[1:], mac),
		p(name, rev, "%"+strings.ToUpper(hexOf(mac[0]))+mac[1:]),
		p(name, rev, mac+mac), p(name, rev, mac+"0"), p(name, rev, mac[:len(mac)-1]),
		p(name, rev, mac) + "/", p(name, rev, mac) + "/x", p(name+"/"+name, rev, mac),
		api.PathIngressApplied + name + "//" + rev + "/" + mac,
		p(name, rev, " "+mac[1:]), p(name, rev, "+"+mac[1:]),
	}
	before := st.n.Load()
	for i := range 400 {
		path := refused[i%len(refused)]
		if code, b := n.raw("GET", asSent(t, path), "", ""); code != http.StatusNotFound || !strings.Contains(b, `"error"`) {
			t.Fatalf("forged or respelled callback %s: %d %s, want 404 JSON", path, code, b)
		}
	}
	if got := st.n.Load() - before; got != 0 {
		t.Errorf("400 forged callbacks made %d store requests, want none", got)
	}
	if in := n.ingress(t, "edge-p"); in.Applied == nil || in.Applied.Serial != 0 {
		t.Fatalf("after forged callbacks: %+v, want nothing applied", in)
	}
	if code, b := n.raw("GET", cb+"?x=1", "", ""); code != http.StatusOK || !strings.Contains(b, "recorded") {
		t.Fatalf("the callback with a query: %d %s, want 200 recorded", code, b)
	}
	if code, b := n.raw("GET", cb, "", ""); code != http.StatusOK || !strings.Contains(b, "already") {
		t.Fatalf("the callback replayed: %d %s, want 200 already", code, b)
	}
	if code, _ := n.raw(http.MethodHead, cb, "", ""); code != http.StatusOK { // chi serves it as GET
		t.Errorf("HEAD callback: %d", code)
	}
}

// asSent is path as Go's client puts it on the request line (a space escaped, an
// escape kept as written).
func asSent(t *testing.T, path string) string {
	t.Helper()
	u, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI()
}

func hexOf(c byte) string { return string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15]) }

// storeOps counts the requests made to the store: every one (n; reads of except, when
// set, left out), and what checking application tokens costs: reads of token records
// (Records) and of the tokens' MAC key (Key), and LISTs of the tokens (Lists).
type storeOps struct {
	store.Store
	n, Records, Key, Lists atomic.Int64
	except                 string
}

// countedAPI is the API in process over a directory store counting its requests (reads
// of except not in n).
func countedAPI(t *testing.T, except string) (*inProcess, *storeOps) {
	t.Helper()
	d, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &storeOps{Store: d, except: except}
	return newInProcessOn(t, st, nil), st
}

func (s *storeOps) Get(ctx context.Context, key string) (store.Object, error) {
	s.read(key)
	return s.Store.Get(ctx, key)
}

func (s *storeOps) GetIfChanged(ctx context.Context, key, etag string) (store.Object, bool, error) {
	s.read(key)
	return s.Store.GetIfChanged(ctx, key, etag)
}

func (s *storeOps) read(key string) {
	switch {
	case strings.HasPrefix(key, fleet.PrefixTokens):
		s.Records.Add(1)
	case key == fleetwrite.TokenMACKey:
		s.Key.Add(1)
	}
	if s.except == "" || key != s.except {
		s.n.Add(1)
	}
}

func (s *storeOps) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	s.n.Add(1)
	if prefix == fleet.PrefixTokens {
		s.Lists.Add(1)
	}
	return s.Store.List(ctx, prefix)
}

func (s *storeOps) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	s.n.Add(1)
	return s.Store.Put(ctx, key, v, c)
}

func (s *storeOps) Delete(ctx context.Context, key, ifMatch string) error {
	s.n.Add(1)
	return s.Store.Delete(ctx, key, ifMatch)
}
