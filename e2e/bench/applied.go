package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Issue 24 item 1: is a write's ?wait=applied ever early, at 1 000 and 10 000
// applications, through both providers? A flip (the path map of flipHost, as in
// section 6) is PUT with ?wait=applied; the moment it answers 200, one request goes
// through Traefik: the new target must answer it. Each row is one Traefik on the
// shipped static configuration:
//
//   - plugin, appliedProbe (shipped): applied once Traefik serves the probe router;
//   - plugin, appliedDelay only: applied a fixed 500 ms after the hand-over (the
//     control: what the plugin did before the probe);
//   - HTTP provider, X-Scafo-Applied-Probe (shipped): applied once Traefik's own health
//     check reaches the node through the callback router of the body it serves;
//   - HTTP provider without the probe: "served", counted when Traefik polls again after
//     taking the answer (the control: Traefik's HTTP provider reports nothing).
//
// An early answer is one whose first request after it reached the old target.

type appliedCase struct {
	apps  int
	kind  providerKind
	probe bool
}

func (c appliedCase) name() string {
	switch {
	case c.kind == providerHTTP && c.probe:
		return thousands(c.apps) + " apps, HTTP provider, X-Scafo-Applied-Probe (shipped)"
	case c.kind == providerHTTP:
		return thousands(c.apps) + " apps, HTTP provider, served (control)"
	case c.probe:
		return thousands(c.apps) + " apps, plugin, appliedProbe (shipped)"
	default:
		return thousands(c.apps) + " apps, plugin, appliedDelay 500ms (control)"
	}
}

type appliedRun struct {
	c       appliedCase
	flips   int
	early   int
	answers []time.Duration // PUT sent → 200
	lateBy  []time.Duration // of the early ones: 200 → first request routed by the new target
}

func waitAppliedIsNeverEarlyByFleetSize(t *task) {
	sizes := envInts(t, "SCAFO_BENCH_APPLIED_SIZES", []int{1000, 10000})
	flips := envInt(t, "SCAFO_BENCH_APPLIED_FLIPS", 10)
	var runs []appliedRun
	for _, n := range sizes {
		for _, c := range []appliedCase{{n, providerPlugin, true}, {n, providerPlugin, false}, {n, providerHTTP, true}, {n, providerHTTP, false}} {
			t.Run(c.name(), func(t *task) {
				r := measureApplied(t, c, flips)
				runs = append(runs, r)
				if c.probe && r.early > 0 {
					t.Errorf("%s: %d of %d answers early", c.name(), r.early, r.flips)
				}
			})
		}
	}
	rows := []string{
		fmt.Sprintf("%d flips per row, each a PUT of a path map with `?wait=applied&timeout=60s`; on its 200, one request through Traefik. "+
			"Early: that request reached the old target. One node (dir store, the generated fleet of section 6), one Traefik on the shipped static configuration (throttle 100ms).", flips),
		"",
		"| fleet, provider | answers early | PUT → 200 p50 | p95 | early answers: 200 → routed, max |",
		"|---|---|---|---|---|",
	}
	for _, r := range runs {
		late := "—"
		if len(r.lateBy) > 0 {
			late = secs(pct(r.lateBy, 100)) + " s"
		}
		rows = append(rows, fmt.Sprintf("| %s | %d of %d | %s s | %s s | %s |", r.c.name(), r.early, r.flips,
			secs(pct(r.answers, 50)), secs(pct(r.answers, 95)), late))
	}
	report.add(secApplied, append(rows, "")...)
}

func measureApplied(t *task, c appliedCase, flips int) appliedRun {
	run := appliedRun{c: c}
	backends := startFleetBackends(t)
	root := storeDir(t)
	writeFlipFleet(t, root, fleetSpec{apps: c.apps}, backends)
	nd := newNode(t, "bench-a", root)
	nd.start(t)
	if err := nd.proc.WaitUntil(time.Minute, func() error { return apiChainHas(nd, nd.name) }); err != nil {
		t.Fatalf("waiting for %s in its own document's API chain: %v", nd.name, err)
	}
	l := providerLaunch{kind: c.kind, endpoints: []string{nodeBaseURL(nd)}, noProbe: c.kind == providerHTTP && !c.probe}
	if c.kind == providerPlugin {
		l.plugin = map[string]any{"name": "bench-plugin"}
		if !c.probe {
			l.plugin["appliedProbe"] = nil
		}
	}
	tr := startProviderTraefik(t, "traefik-"+string(c.kind), l)
	current := 0
	want := func(k int) string { return identityName(flipTargets[k], placementOf(k + 1)[0]) }
	waitFirstRoute(t, tr, want(current), "Traefik ("+string(c.kind)+")")
	// The ingress is known to the node (a report) before the first flip, or the first
	// wait would have nobody to wait for.
	if err := nd.proc.WaitUntil(2*time.Minute, func() error { return ingressCurrent(nd) }); err != nil {
		t.Fatalf("waiting for the Traefik's report: %v", err)
	}
	for i := range flips {
		next := 1 - current
		t0 := time.Now()
		status, body := putFlipWaiting(t, nd, flipTargets[next])
		answered := time.Now()
		if status != http.StatusOK || !strings.Contains(body, `"applied":true`) || !strings.Contains(body, `"ingresses":1`) {
			t.Fatalf("flip %d: %d %s, want 200 applied by one ingress", i, status, body)
		}
		run.answers = append(run.answers, answered.Sub(t0))
		st, got, err := tr.get(flipHost, "/"+flipPrefix+"/x")
		if err != nil || st != 200 || got != want(next) {
			run.early++
			var d time.Duration
			if err := waitRouted(tr, want(next), answered, &d); err != nil {
				t.Fatalf("flip %d: %v", i, err)
			}
			run.lateBy = append(run.lateBy, d)
			t.Logf("flip %d early: right after the 200 Traefik answered %d %q %v; routed %s later", i, st, got, err, d.Round(time.Millisecond))
		}
		run.flips++
		current = next
	}
	t.Logf("%s: %d of %d answers early, PUT → 200 %v", c.name(), run.early, run.flips, run.answers)
	tr.proc.Stop(10 * time.Second)
	nd.proc.Stop(10 * time.Second)
	return run
}

// ingressCurrent is nil once the node's status lists one ingress, current.
func ingressCurrent(nd *benchNode) error {
	req, err := http.NewRequest(http.MethodGet, nd.url("/v1/status"), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
	resp, err := pollClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var st struct {
		Ingresses []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"ingresses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return err
	}
	if len(st.Ingresses) != 1 || st.Ingresses[0].State != "current" {
		return fmt.Errorf("ingresses %+v", st.Ingresses)
	}
	return nil
}

// putFlipWaiting is putFlip with ?wait=applied&timeout=60s; it returns the answer.
func putFlipWaiting(t *task, nd *benchNode, target string) (int, string) {
	body, _ := json.Marshal(map[string]any{"paths": map[string]string{flipPrefix: target + "." + platformDomain}})
	req, err := http.NewRequest(http.MethodPut, nd.url("/v1/apps/"+flipOwner+"/domains/"+flipHost+"/paths?wait=applied&timeout=60s"), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 90 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("PUT paths: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
