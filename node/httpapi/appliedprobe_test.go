package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
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

// TestAppliedProbeIsValidated: a malformed X-Scafo-Applied-Probe, or one that cannot
// apply, is 400 naming the field, never ignored (an ingress that asked for a true
// "applied" and silently got "served" would let deploys stop old processes early).
func TestAppliedProbeIsValidated(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	for _, tc := range []struct {
		path, token string
		hdr         []string
		field       string
	}{
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "ftp://127.0.0.1:80"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "http://127.0.0.1:80/x"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "http://u:p@127.0.0.1:80"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "127.0.0.1:80"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, "http://127.0.0.1:99999"}, api.HeaderAppliedProbe},
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderAppliedProbe, testnode.ProbeURL}, api.HeaderIngress},
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderIngress, "Edge_P", api.HeaderAppliedProbe, testnode.ProbeURL}, api.HeaderIngress},
		{"/v1/ingress/traefik", ipIngress, []string{api.HeaderIngress, "edge-p", api.HeaderIngressKind, api.KindPlugin, api.HeaderAppliedProbe, testnode.ProbeURL}, "plugin"},
		{"/v1/ingress/routes", ipIngress, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, testnode.ProbeURL}, "only on"},
		{"/v1/ingress/traefik", ipAdmin, []string{api.HeaderIngress, "edge-p", api.HeaderAppliedProbe, testnode.ProbeURL}, "admin"},
	} {
		resp, body := n.Get(tc.path, tc.token, tc.hdr...)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.field) {
			t.Errorf("%s %v: %d %s, want 400 naming %s", tc.path, tc.hdr, resp.StatusCode, body, tc.field)
		}
	}
	// Given twice.
	req, _ := http.NewRequest("GET", "http://127.0.0.1/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+ipIngress)
	req.Header.Set(api.HeaderIngress, "edge-p")
	req.Header.Add(api.HeaderAppliedProbe, testnode.ProbeURL)
	req.Header.Add(api.HeaderAppliedProbe, testnode.ProbeURL)
	if rec := n.serve(req); rec.Code != http.StatusBadRequest {
		t.Errorf("the probe header twice: %d, want 400", rec.Code)
	}
	// A valid one: the body carries the probe, the callback goes to the node as polled.
	_, body, cb := n.probePoll(t, "edge-p")
	if cb == "" || !strings.HasPrefix(cb, api.PathIngressApplied+"edge-p/") {
		t.Fatalf("callback path %q", cb)
	}
	if !strings.Contains(string(body), `"url":"http://127.0.0.1"`) {
		t.Errorf("the callback service does not reach the node as polled (http://127.0.0.1)")
	}
	// Without the header: the same document's body, no probe.
	if _, plain := n.Get("/v1/ingress/traefik?prefer=self", ipIngress, api.HeaderIngress, "edge-q"); testnode.CallbackOf(t, plain) != "" {
		t.Error("a poll without the probe header got the probe")
	}
}

// TestAppliedCallbackRespellingsAreRefused: respellings of a real callback are no
// callback. The MAC is lowercase hex of one length over the ingress and revision exactly
// as served: an upper-case MAC, name or revision, a percent-encoded segment (chi routes
// on the raw path), the full 64-hex HMAC, a longer or shorter MAC, a trailing slash, an
// extra or a doubled segment are 404 and record nothing; a query string is not part of
// the path (the same callback). Then the real one is recorded, a replay is "already",
// and HEAD answers as GET.
func TestAppliedCallbackRespellingsAreRefused(t *testing.T) {
	t.Parallel()
	n := newInProcess(t, nil)
	_, _, cb := n.probePoll(t, "edge-p")
	parts := strings.Split(strings.TrimPrefix(cb, api.PathIngressApplied), "/")
	if len(parts) != 3 {
		t.Fatalf("callback %q", cb)
	}
	name, rev, mac := parts[0], parts[1], parts[2]
	p := func(n, r, m string) string { return api.PathIngressApplied + n + "/" + r + "/" + m }
	for _, path := range []string{
		p(name, rev, strings.ToUpper(mac)),
		p(strings.ToUpper(name), rev, mac),
		p(name, strings.ToUpper(rev), mac),
		p("%65"+name[1:], rev, mac),
		p(name, "%"+strings.ToUpper(hexOf(rev[0]))+rev[1:], mac),
		p(name, rev, "%"+strings.ToUpper(hexOf(mac[0]))+mac[1:]),
		p(name, rev, mac+mac),
		p(name, rev, mac+"0"),
		p(name, rev, mac[:len(mac)-1]),
		p(name, rev, mac) + "/",
		p(name, rev, mac) + "/x",
		p(name+"/"+name, rev, mac),
		api.PathIngressApplied + name + "//" + rev + "/" + mac,
		p(name, rev, " "+mac[1:]),
		p(name, rev, "+"+mac[1:]),
	} {
		if code, b := n.raw("GET", asSent(t, path), "", ""); code != http.StatusNotFound {
			t.Errorf("respelled callback %s: %d %s, want 404", path, code, b)
		}
	}
	if in := n.ingress(t, "edge-p"); in.Applied == nil || in.Applied.Serial != 0 {
		t.Fatalf("after respelled callbacks: %+v, want nothing applied", in)
	}
	if code, b := n.raw("GET", cb+"?x=1", "", ""); code != http.StatusOK || !strings.Contains(b, "recorded") {
		t.Fatalf("the callback with a query: %d %s, want 200 recorded", code, b)
	}
	if code, b := n.raw("GET", cb, "", ""); code != http.StatusOK || !strings.Contains(b, "already") {
		t.Fatalf("the callback replayed: %d %s, want 200 already", code, b)
	}
	// HEAD (chi serves it as GET): the same answer.
	if code, _ := n.raw(http.MethodHead, cb, "", ""); code != http.StatusOK {
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
