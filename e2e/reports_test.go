package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Scenarios 19 and 20: ingress reports (docs/design.md §11) through real Traefiks.

// ownPorts gives a fleet its own slice of the suite's instance-port range, so these
// scenarios do not collide with another suite run on the same machine (the echo
// instances bind the node addresses' allocated ports).
func ownPorts() []string {
	lo := portsMin + 1000 + (os.Getpid()%14)*250
	return []string{"--ports.min=" + strconv.Itoa(lo), "--ports.max=" + strconv.Itoa(lo+249)}
}

// ingressRow is one ingress of /v1/status.
type ingressRow struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Node    string `json:"node"`
	State   string `json:"state"`
	Behind  uint64 `json:"behind"`
	Applied *struct {
		Serial uint64 `json:"serial"`
	} `json:"applied"`
	Served *struct {
		Serial uint64 `json:"serial"`
	} `json:"served"`
}

func (n *node) ingresses(t *testing.T) map[string]ingressRow {
	t.Helper()
	var st struct {
		Ingresses []ingressRow `json:"ingresses"`
	}
	n.call(t, http.MethodGet, "/v1/status", nil, &st)
	out := map[string]ingressRow{}
	for _, in := range st.Ingresses {
		out[in.Name] = in
	}
	return out
}

// appliedAnswer is a write's answer with ?wait=applied.
type appliedAnswer struct {
	Serial    uint64       `json:"serial"`
	Applied   bool         `json:"applied"`
	Ingresses int          `json:"ingresses"`
	Behind    []ingressRow `json:"behind"`
	Detail    string       `json:"detail"`
}

// putPathsWaiting publishes a path map with ?wait=applied&timeout=timeout and returns
// the status, the answer, and when the answer arrived.
func (n *node) putPathsWaiting(t *testing.T, app, host string, paths map[string]string, timeout time.Duration) (int, appliedAnswer, time.Time) {
	t.Helper()
	status, b := n.do(t, http.MethodPut, "/v1/apps/"+app+"/domains/"+url.PathEscape(host)+"/paths?wait=applied&timeout="+timeout.String(),
		map[string]any{"paths": paths}, testAdminToken)
	at := time.Now()
	var a appliedAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("PUT paths with wait=applied: %d %s: %v", status, b, err)
	}
	return status, a, at
}

// Scenario 19: three Traefiks (two on the plugin, one on the HTTP provider) on three
// nodes. A flip made with wait=applied answers only once all three route it: no request
// sent to any of them after the answer reaches the app the account was flipped away
// from. Then one Traefik is stopped: the next flip answers 202 at its timeout naming
// it, and status reports it lost.
func TestFlipWithWaitAppliedIsLiveOnEveryTraefikWhenItAnswers(t *testing.T) {
	f := startFleet(t, 3, nodeOptions{args: append(ownPorts(), "--ingresses.lostAfter=12s")})
	n1, n2, n3 := f.nodes[0], f.nodes[1], f.nodes[2]
	f.deploy(t, "classic", "acme", []*node{n1}, "")
	f.deploy(t, "next", "acme", []*node{n1}, "")
	const host, target = "ti.example.org", "next.apps.localhost"
	n1.claim(t, "classic", host)

	pa := startPluginTraefik(t, "traefik-plugin-a", pluginTraefikOptions{endpoints: []*node{n1}, prefer: "n1", name: "edge-a"})
	pb := startPluginTraefik(t, "traefik-plugin-b", pluginTraefikOptions{endpoints: []*node{n2}, prefer: "n2", name: "edge-b"})
	hc := startTraefik(t, "traefik-http-c", traefikOptions{node: n3, ingressName: "edge-c"})
	trs := []*traefik{pa, pb, hc}
	for _, tr := range trs {
		tr.waitServedBy(t, host, "/paulca/x", "classic@n1", routeTimeout)
	}
	waitFor(t, "three ingresses current on n2", routeTimeout, func() error {
		ins := n2.ingresses(t)
		for _, want := range []struct{ name, kind, node string }{{"edge-a", "plugin", "n1"}, {"edge-b", "plugin", "n2"}, {"edge-c", "http", "n3"}} {
			in, ok := ins[want.name]
			if !ok || in.State != "current" || in.Kind != want.kind || in.Node != want.node {
				return fmt.Errorf("%s: %+v", want.name, in)
			}
		}
		return nil
	})

	loops := make([]*requestLoop, len(trs))
	for i, tr := range trs {
		loops[i] = startLoop(t, tr, host, "/paulca/x", 10*time.Millisecond)
	}
	var took []time.Duration
	flips := []struct {
		paths map[string]string
		want  string
	}{
		{map[string]string{"paulca": target}, "next@n1"},
		{map[string]string{}, "classic@n1"},
		{map[string]string{"paulca": target}, "next@n1"},
		{map[string]string{}, "classic@n1"},
		{map[string]string{"paulca": target}, "next@n1"},
	}
	for i, flip := range flips {
		via := f.nodes[i%3]
		t0 := time.Now()
		status, a, answered := via.putPathsWaiting(t, "classic", host, flip.paths, 10*time.Second)
		took = append(took, answered.Sub(t0))
		if status != http.StatusOK || !a.Applied || a.Ingresses != 3 {
			t.Fatalf("flip %d through %s: %d %+v, want 200 applied by 3 ingresses", i, via.name, status, a)
		}
		// Right after the answer, every Traefik routes it.
		for _, tr := range trs {
			for range 5 {
				r, err := tr.get(host, "/paulca/x")
				if err != nil || r.from() != flip.want {
					t.Errorf("flip %d: %s answered %v (%v) right after the write returned, want %s", i, tr.name, r.from(), err, flip.want)
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
		for j, l := range loops {
			for _, s := range l.since(answered) {
				if s.from != flip.want {
					t.Errorf("flip %d: %s served a request sent %s after the answer from %s, want %s",
						i, trs[j].name, s.at.Sub(answered).Round(time.Millisecond), s.from, flip.want)
				}
			}
		}
	}
	for _, l := range loops {
		l.stop()
	}
	sorted := append([]time.Duration(nil), took...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	t.Logf("flips with wait=applied, PUT → 200 (all three Traefiks route it): %v (median %s)", roundAll(took), ms(sorted[len(sorted)/2]))

	// One Traefik stops (SIGKILL: its long-poll dies with it).
	pb.proc.Kill()
	t0 := time.Now()
	status, a, answered := n1.putPathsWaiting(t, "classic", host, map[string]string{}, 6*time.Second)
	if status != http.StatusAccepted || a.Applied || len(a.Behind) != 1 || a.Behind[0].Name != "edge-b" || !strings.Contains(a.Detail, "edge-b") {
		t.Fatalf("flip with edge-b stopped: %d %+v, want 202 naming edge-b", status, a)
	}
	timedOut := answered.Sub(t0)
	for _, tr := range []*traefik{pa, hc} {
		tr.expectServedBy(t, host, "/paulca/x", "classic@n1")
	}
	waitFor(t, "edge-b lost", 20*time.Second, func() error {
		if in := n3.ingresses(t)["edge-b"]; in.State != "lost" {
			return fmt.Errorf("edge-b %+v", in)
		}
		return nil
	})
	lost := time.Since(t0)
	// Lost ingresses are not waited for (through n3, which reported it lost; a node
	// reads another's report at the seen time that node last wrote, refreshed every
	// lostAfter/4, so nodes may call it lost up to that much apart).
	status, a, _ = n3.putPathsWaiting(t, "classic", host, map[string]string{"paulca": target}, 10*time.Second)
	if status != http.StatusOK || a.Ingresses != 2 {
		t.Errorf("flip with edge-b lost: %d %+v, want 200 applied by the 2 live ingresses", status, a)
	}
	t.Logf("edge-b killed: the next flip answered 202 naming it after %s (timeout 6s); reported lost %s after the kill (ingresses.lostAfter 12s)", ms(timedOut), ms(lost))
	results.add("Scenario 19: flips confirmed with wait=applied, three Traefiks",
		"Three nodes on one dir store; Traefiks: two on `traefik-plugin.yml` (edge-a on n1, edge-b on n2, appliedDelay 500ms shipped) and one on `traefik.yml` (edge-c, HTTP provider on n3, pollInterval 1s); "+
			"path-map flips PUT with `?wait=applied&timeout=10s` through n1, n2, n3 in turn, under a request every 10 ms through each Traefik.",
		"",
		fmt.Sprintf("- PUT → 200 (every Traefik reports it): %v, median %s; every request sent after the answer was served by the new target on all three", roundAll(took), ms(sorted[len(sorted)/2])),
		fmt.Sprintf("- edge-b SIGKILLed: the next flip answered 202 naming edge-b after %s (timeout 6s); status reported it lost %s after the kill (lostAfter 12s)", ms(timedOut), ms(lost)),
	)
}

// Scenario 20: the plugin survives restarts. Traefik restarted while no node answers
// routes every host from its state file; once a node is back, a newer configuration
// is applied.
func TestPluginRoutesFromItsStateFileWhenRestartedWithNodesDown(t *testing.T) {
	f := startFleet(t, 2, nodeOptions{args: ownPorts()})
	n1, n2 := f.nodes[0], f.nodes[1]
	both := []*node{n1, n2}
	f.deploy(t, "shop", "acme", both, "/healthz")
	f.deploy(t, "blog", "acme", both, "/healthz")
	n1.claim(t, "shop", "shop.example.org")

	dir := t.TempDir()
	opts := pluginTraefikOptions{endpoints: both, prefer: "n1", name: "edge-a", dir: dir}
	tr := startPluginTraefik(t, "traefik-plugin", opts)
	hosts := map[string]string{"shop.apps.localhost": "shop@n1", "blog.apps.localhost": "blog@n1", "shop.example.org": "shop@n1"}
	for h, want := range hosts {
		tr.waitServedBy(t, h, "/", want, routeTimeout)
	}
	state := filepath.Join(dir, "scafo.last.json")
	waitFor(t, "the state file", routeTimeout, func() error {
		b, err := os.ReadFile(state)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "shop.example.org") {
			return fmt.Errorf("state file without shop.example.org")
		}
		return nil
	})
	tr.proc.Stop(10 * time.Second)
	n1.stop(t)
	n2.stop(t)

	t0 := time.Now()
	tr2 := startPluginTraefik(t, "traefik-plugin-restarted", opts)
	for h, want := range hosts {
		tr2.waitServedBy(t, h, "/", want, routeTimeout)
	}
	routed := time.Since(t0)
	if !strings.Contains(tr2.proc.Output(), "emitting the configuration saved in") {
		t.Error("the plugin did not log that it emitted its saved configuration")
	}

	// A node comes back; a change made there is applied, and saved.
	n2.start(t)
	n2.putApp(t, appSpec{Name: "blog", Account: "acme", Placement: []string{"n2", "n1"}})
	tr2.waitServedBy(t, "blog.apps.localhost", "/", "blog@n2", routeTimeout)
	waitFor(t, "the state file to hold the newer configuration", routeTimeout, func() error {
		tr2Rd, _ := os.ReadFile(state)
		var st struct{ Revision string }
		if err := json.Unmarshal(tr2Rd, &st); err != nil {
			return err
		}
		if cur := n2.ingress(t, "", "identity"); st.Revision != cur.revision {
			return fmt.Errorf("state file at revision %s, n2 at %s", st.Revision, cur.revision)
		}
		return nil
	})
	t.Logf("Traefik restarted with both nodes down: every host routed %s after the process started (from the state file)", ms(routed))
	results.add("Scenario 20: the plugin survives a restart with every node down",
		fmt.Sprintf("Traefik on `traefik-plugin.yml` stopped, both nodes stopped, Traefik started again: its three hosts routed %s after the process started, "+
			"from the state file; a node restarted and a change made there was applied and saved.", ms(routed)),
	)
	tr2.requireProviderClean(t, pluginProvider)
}
