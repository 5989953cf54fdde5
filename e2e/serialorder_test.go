package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// nodeAnswer is one answer of a node's /v1/ingress/traefik, headers that matter included.
type nodeAnswer struct {
	body   []byte
	etag   string
	serial string // X-Scafo-Serial
	epoch  string // X-Scafo-Epoch
}

// captureAnswer asks n for its Traefik configuration, as the plugin does (no prefer).
func captureAnswer(t *testing.T, n *node) nodeAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.url("/v1/ingress/traefik"), nil)
	req.Header.Set("Authorization", "Bearer "+testIngressToken)
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", req.URL, resp.StatusCode, err)
	}
	a := nodeAnswer{body: b, etag: resp.Header.Get("ETag"), serial: resp.Header.Get("X-Scafo-Serial"), epoch: resp.Header.Get("X-Scafo-Epoch")}
	if a.etag == "" || a.serial == "" || a.epoch == "" {
		t.Fatalf("%s answered without ETag, X-Scafo-Serial or X-Scafo-Epoch: %q %q %q", n.name, a.etag, a.serial, a.epoch)
	}
	return a
}

// replayNode stands in for a node: it serves one nodeAnswer at a time with the node's
// protocol (If-None-Match lists, ?wait= long-polls held while a listed tag matches),
// so a test can play a node that is a tick behind with a real node's real answers.
type replayNode struct {
	srv *http.Server
	url string

	mu      sync.Mutex
	cur     nodeAnswer
	changed chan struct{}
	polls   []string // If-None-Match of every request
}

func startReplayNode(t *testing.T, ip string, a nodeAnswer) *replayNode {
	t.Helper()
	l, err := net.Listen("tcp", hostPort(ip, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := &replayNode{cur: a, changed: make(chan struct{}), url: "http://" + l.Addr().String()}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve)}
	go r.srv.Serve(l)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

func (r *replayNode) set(a nodeAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur = a
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *replayNode) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.polls...)
}

func (r *replayNode) serve(w http.ResponseWriter, req *http.Request) {
	if req.Header.Get("Authorization") != "Bearer "+testIngressToken {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	inm := req.Header.Get("If-None-Match")
	matches := func(etag string) bool {
		for _, tag := range strings.Split(inm, ",") {
			if strings.TrimSpace(tag) == etag {
				return true
			}
		}
		return false
	}
	r.mu.Lock()
	r.polls = append(r.polls, inm)
	cur, changed := r.cur, r.changed
	r.mu.Unlock()
	wait, _ := time.ParseDuration(req.URL.Query().Get("wait"))
	deadline := time.After(wait)
	for inm != "" && matches(cur.etag) && wait > 0 {
		select {
		case <-changed:
			r.mu.Lock()
			cur, changed = r.cur, r.changed
			r.mu.Unlock()
			continue
		case <-deadline:
		case <-req.Context().Done():
			return
		}
		break
	}
	h := w.Header()
	h.Set("ETag", cur.etag)
	h.Set("X-Scafo-Serial", cur.serial)
	h.Set("X-Scafo-Epoch", cur.epoch)
	if inm != "" && matches(cur.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(cur.body)
}

// Scenario 17: order across nodes, inside a real Traefik with the provider plugin. The
// plugin reads from n1; a flip through n1 reaches Traefik; n1 dies and the plugin moves
// to a node that is a tick behind (a stand-in replaying n1's own answer from before the
// flip, with its serial). Traefik must keep the flip: the older configuration is never
// applied. When that node then serves a configuration of a later serial (here the same
// routing as before the flip: a revert), it is applied.
func TestPluginNeverAppliesAnOlderSerial(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{})
	n1 := f.nodes[0]
	f.deploy(t, "site", "acme", []*node{n1}, "/healthz")
	f.deploy(t, "blog", "acme", []*node{n1}, "/healthz")
	const pathHost, target = "paths.example.org", "blog.apps.localhost"
	n1.claim(t, "site", pathHost)
	waitFor(t, "n1 to route "+pathHost, routeTimeout, func() error {
		if a := captureAnswer(t, n1); !strings.Contains(string(a.body), pathHost) {
			return fmt.Errorf("not in n1's configuration yet")
		}
		return nil
	})
	before := captureAnswer(t, n1)
	behind := startReplayNode(t, "127.0.0.9", before)

	tr := startPluginTraefik(t, "traefik-plugin", pluginTraefikOptions{endpoints: []*node{n1}, urls: []string{behind.url}})
	tr.waitServedBy(t, pathHost, "/b", "site@n1", routeTimeout)
	n1.putPaths(t, "site", pathHost, map[string]string{"b": target})
	tr.waitServedBy(t, pathHost, "/b", "blog@n1", routeTimeout)
	flipped := captureAnswer(t, n1)
	beforeN, err1 := strconv.ParseUint(before.serial, 10, 64)
	flippedN, err2 := strconv.ParseUint(flipped.serial, 10, 64)
	if err1 != nil || err2 != nil || flippedN <= beforeN {
		t.Fatalf("n1's serial did not move forward with the flip: %q then %q", before.serial, flipped.serial)
	}

	logFrom := tr.proc.LogSize()
	n1.proc.Kill()
	if err := tr.proc.WaitLog(20*time.Second, logFrom, "switching to "+behind.url); err != nil {
		t.Fatalf("waiting for the plugin to switch to the stand-in node: %v", err)
	}
	// Well past the provider throttle (100 ms) and a Traefik rebuild: the flip holds.
	held, wrong := time.Now(), 0
	for time.Since(held) < 3*time.Second {
		if r, err := tr.get(pathHost, "/b"); err != nil || r.from() != "blog@n1" {
			wrong++
		}
		time.Sleep(50 * time.Millisecond)
	}
	if wrong > 0 {
		t.Fatalf("%d requests in the 3 s after the switch were not served by the flipped target: the older configuration was applied", wrong)
	}
	if err := tr.proc.WaitLog(5*time.Second, logFrom, "older than serial "+flipped.serial); err != nil {
		t.Errorf("the plugin did not log the older configuration it kept out: %v", err)
	}
	polls := behind.seen()
	parked := false
	for _, inm := range polls {
		if strings.Contains(inm, flipped.etag) && strings.Contains(inm, before.etag) {
			parked = true
		}
	}
	if !parked {
		t.Errorf("the plugin never long-polled the behind node past both configurations; If-None-Match seen: %q", polls)
	}

	// The stand-in catches up to the flip: nothing changes.
	behind.set(flipped)
	time.Sleep(500 * time.Millisecond)
	tr.expectServedBy(t, pathHost, "/b", "blog@n1")

	// A later serial that routes /b back to site (a revert): applied, and fast although
	// it is the very body the plugin kept out before.
	revert := before
	revert.serial = strconv.FormatUint(flippedN+1, 10)
	t0 := time.Now()
	behind.set(revert)
	tr.waitServedBy(t, pathHost, "/b", "site@n1", routeTimeout)
	applied := time.Since(t0)
	t.Logf("older configuration (serial %s) kept out for 3 s after the switch; a later serial (%s) with the same body applied after %s",
		before.serial, revert.serial, ms(applied))
	results.add("Scenario 17: provider plugin, order across nodes",
		"One node n1 and a stand-in endpoint replaying n1's own answer from before a flip (its X-Scafo-Serial, a tick behind). "+
			"Traefik on `traefik-plugin.yml` with `endpoints: [n1, stand-in]` took the flip from n1; n1 was SIGKILLed.",
		"",
		fmt.Sprintf("- the plugin switched to the stand-in and kept the flip: serial %s's configuration not applied (3 s of requests, all on the flipped target)", before.serial),
		fmt.Sprintf("- the stand-in serving the flip's serial %s: nothing changed; a later serial with the pre-flip routing: applied after %s", flipped.serial, ms(applied)),
	)
}
