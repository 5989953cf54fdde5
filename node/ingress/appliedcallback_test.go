package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/internal/nodetest"
	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// Hostile round six: the applied probe's callback comes from the Traefik that serves
// the body, through the same address as everything that Traefik forwards to the node
// (the public apex's internet clients included). An anonymous flood through the apex
// that holds that address's general connections (limits.maxConnsPerSource), or the
// node's whole general part, must not refuse the callback: it is Traefik's own traffic,
// a GET without a body, verified by its MAC without a store read, like a health probe.
// Refused, ?wait=applied never answered 200 for that ingress while the flood lasted
// (202 at its timeout, every write). A forged callback on the reserve is a 404 (and the
// connection closes), like any other request the reserve serves.
func TestAppliedCallbackIsServedFromTheConnectionReserve(t *testing.T) {
	t.Parallel()
	cfg := testnode.ReportsConfig(t, "vps-a", t.TempDir())
	cfg.Limits.MaxConns = 40
	cfg.Limits.ReservedConns = 4
	cfg.Limits.MaxConnsPerSource = 2
	n := testnode.Start(t, cfg)
	n.WaitReady()
	_, _, cb := probePoll(t, n, "edge-p")
	if cb == "" {
		t.Fatal("no callback in the probe body")
	}
	// 127.0.0.3 is the Traefik: the flood it forwards holds its general connections.
	for range 2 {
		c := testnode.DialFrom(t, n, "127.0.0.3", testnode.HealthzKeepAlive)
		if resp, body := testnode.ReadAnswer(t, c, 2*time.Second); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("keep-alive healthz: %d close=%v %s", resp.StatusCode, resp.Close, body)
		}
	}
	// A write from that address is refused (the reserve is not for it; one with the
	// admin or ingress token would pass: httpapi's
	// TestTheNodesTokensPassTheCapOfAnAddressTheyShare)...
	write := "PUT /v1/apps/shop HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18\r\n\r\n{\"account\":\"acme\"}"
	if resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", write), 2*time.Second); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a write past the per-source cap: %d %s, want 503", resp.StatusCode, body)
	}
	// ...and so is a forged callback's neighbour that is no route of the reserve.
	other := "GET /v1/ingress/appliedx/a/b/c HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	if resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", other), 2*time.Second); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("an anonymous non-callback path past the per-source cap: %d %s, want 503", resp.StatusCode, body)
	}
	// A forged callback: 404, closed.
	forged := strings.TrimSuffix(cb, cb[len(cb)-4:]) + "0000"
	if forged == cb {
		forged = strings.TrimSuffix(cb, cb[len(cb)-4:]) + "1111"
	}
	resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", "GET "+forged+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 2*time.Second)
	if resp.StatusCode != http.StatusNotFound || !resp.Close {
		t.Errorf("a forged callback past the per-source cap: %d close=%v %s, want 404 and closed", resp.StatusCode, resp.Close, body)
	}
	// The real callback: recorded, and the ingress is current.
	resp, body = testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", "GET "+cb+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), 2*time.Second)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "recorded") || !resp.Close {
		t.Fatalf("the callback past the per-source cap: %d close=%v %s, want 200 recorded (closed)", resp.StatusCode, resp.Close, body)
	}
	nodetest.WaitFor(t, 2*time.Second, "edge-p current after its callback", func() bool {
		return testnode.IngressesOf(t, n)["edge-p"].State == "current"
	})
	// With a body, a callback is no callback: refused on the reserve.
	withBody := "GET " + cb + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"
	if resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.3", withBody), 2*time.Second); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a callback with a body past the per-source cap: %d %s, want 503", resp.StatusCode, body)
	}
	_ = api.PathIngressApplied
}

// Hostile round six: the callback service's URL is the poll's Host. Whatever Host a
// poller sends, the answer is a 400 naming Host (or net/http's own 400 for a Host it
// cannot parse, or the Host guard's 421 for a name the node does not go by), or a body
// that is valid JSON whose callback service is that one URL
// and whose routers are the plain body's plus the probe's two, the rule unchanged: no
// quote, backtick, slash, @ or escape in a Host reaches the body.
func TestAppliedProbeHostCannotInjectIntoTheBody(t *testing.T) {
	t.Parallel()
	cfg := testnode.ReportsConfig(t, "vps-a", t.TempDir())
	cfg.API.AllowedHosts = []string{"node.example"} // a name the node goes by: the poll reaches the parser
	n := testnode.Start(t, cfg)
	n.WaitReady()
	_, plain := n.Get("/v1/ingress/traefik", testnode.IngressToken)
	var pc struct {
		HTTP struct {
			Routers map[string]json.RawMessage `json:"routers"`
		} `json:"http"`
	}
	if err := json.Unmarshal(plain, &pc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		url  string // "" : refused
	}{
		{"node.example:7400", "http://node.example:7400"},
		{"[::1]:7400", "http://[::1]:7400"},
		{"NODE.example", "http://NODE.example"},
		{"node.example:", "http://node.example:"},
		{"node.example:0", ""},
		{"node.example:65536", ""},
		{"node.example:7400:1", ""},
		{"a_b.example", ""},
		{"a%2Fb.example", ""},
		{"u@node.example", ""},
		{"node.example/x", ""},
		{"node.example`", ""},
		{`node.example"`, ""},
		{`node.example\`, ""},
		{"node.example,evil", ""},
		{"node.example;x", ""},
		{"node.example'", ""},
		{"node.example)", ""},
		{"[::1%25lo]:7400", ""},
		{":7400", ""},
	} {
		req := "GET /v1/ingress/traefik HTTP/1.1\r\nHost: " + tc.host + "\r\nAuthorization: Bearer " + testnode.IngressToken +
			"\r\n" + api.HeaderIngress + ": edge-h\r\n" + api.HeaderAppliedProbe + ": " + testnode.ProbeURL + "\r\nConnection: close\r\n\r\n"
		resp, body := testnode.ReadAnswer(t, testnode.DialFrom(t, n, "127.0.0.1", req), 3*time.Second)
		if tc.url == "" {
			// 421: a Host the node does not go by is refused before any handler (httpapi's
			// TestARebindingHostIsRefused); 400: the poll's parser refuses it.
			if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("Host %q: %d %.300s, want 400 or 421", tc.host, resp.StatusCode, body)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %q: %d %.300s, want 200", tc.host, resp.StatusCode, body)
			continue
		}
		var cfg struct {
			HTTP struct {
				Routers  map[string]json.RawMessage `json:"routers"`
				Services map[string]struct {
					LoadBalancer struct {
						Servers []struct{ URL string } `json:"servers"`
					} `json:"loadBalancer"`
				} `json:"services"`
			} `json:"http"`
		}
		if err := json.Unmarshal([]byte(body), &cfg); err != nil {
			t.Errorf("Host %q: the body is not JSON: %v", tc.host, err)
			continue
		}
		if got := cfg.HTTP.Services["applied-callback"].LoadBalancer.Servers; len(got) != 1 || got[0].URL != tc.url {
			t.Errorf("Host %q: callback servers %+v, want %s", tc.host, got, tc.url)
		}
		if len(cfg.HTTP.Routers) != len(pc.HTTP.Routers)+2 {
			t.Errorf("Host %q: %d routers, want the plain %d and the probe's 2", tc.host, len(cfg.HTTP.Routers), len(pc.HTTP.Routers))
		}
		if m := testnode.CallbackRule.FindStringSubmatch(testnode.RuleOf([]byte(body))); m == nil || !strings.HasPrefix(m[1], api.PathIngressApplied+"edge-h/") {
			t.Errorf("Host %q: callback rule %q", tc.host, testnode.RuleOf([]byte(body)))
		}
	}
}

// Hostile round six: the probe on a ?group= poll. The callback names the group's
// revision; once it comes the ingress is current. A write elsewhere (another group)
// leaves that group's revision, which the ingress holds, so ?wait=applied answers 200
// without a callback; a write to its group waits for a callback of the new body (202
// naming it while it is only served), and another ingress's callback never stands in.
func TestAppliedProbeOnAGroupPoll(t *testing.T) {
	t.Parallel()
	n := testnode.GroupNode(t)
	poll := func(name, group string) (rev, cb string) {
		t.Helper()
		resp, body := n.Get("/v1/ingress/traefik?group="+group, testnode.IngressToken, api.HeaderIngress, name, api.HeaderAppliedProbe, testnode.ProbeURL)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("probe poll ?group=%s: %d %s", group, resp.StatusCode, body)
		}
		return resp.Header.Get(api.HeaderRevision), testnode.CallbackOf(t, body)
	}
	rev, cb := poll("edge-eu", "eu-1")
	if !strings.Contains(cb, "/"+rev+"/") {
		t.Fatalf("callback %s does not name the group's revision %s", cb, rev)
	}
	_, cbDef := poll("edge-def", "default")
	if resp, _ := n.Get(strings.Replace(cbDef, "/edge-def/", "/edge-eu/", 1), ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("edge-def's callback under edge-eu's name: %d, want 404", resp.StatusCode)
	}
	if resp, b := n.Get(cb, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "recorded") {
		t.Fatalf("callback: %d %s", resp.StatusCode, b)
	}
	// edge-def has not called back: a write to default waits for it alone.
	resp, body := n.Do(http.MethodPut, "/v1/apps/cart?wait=applied&timeout=1500ms", testnode.AdminToken, `{"account":"acme","placement":["vps-b"]}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "edge-def") || strings.Contains(string(body), "edge-eu") {
		t.Fatalf("a write to default: %d %s, want 202 naming edge-def alone", resp.StatusCode, body)
	}
	// A write to eu-1, edge-eu served it but not calling back: 202 naming edge-eu.
	stopPolling := probePoller(t, n, "group=eu-1", "edge-eu", nil)
	resp, body = n.Do(http.MethodPut, "/v1/apps/news?wait=applied&timeout=1500ms", testnode.AdminToken, `{"account":"acme","placement":["vps-b"],"ingress":{"group":"eu-1"}}`)
	stopPolling()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), "edge-eu") {
		t.Fatalf("a write to eu-1 served but not called back: %d %s, want 202 naming edge-eu", resp.StatusCode, body)
	}
	// The old callback replayed does not count for the new body.
	if resp, b := n.Get(cb, ""); resp.StatusCode != http.StatusOK || strings.Contains(string(b), "recorded") {
		t.Errorf("old callback replayed: %d %s, want not recorded", resp.StatusCode, b)
	}
	if in := testnode.IngressesOf(t, n)["edge-eu"]; in.State == "current" {
		t.Errorf("edge-eu after the eu-1 write without its callback: %+v, want behind", in)
	}
}
