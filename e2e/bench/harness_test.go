package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scafo/ingress/render/fleet"
)

// Fast tests of the fleet-flip harness (no binaries; they run in `make test`).

func TestProviderStaticChangesOnlyAddressesEndpointsAndToken(t *testing.T) {
	for _, tc := range []struct {
		kind    providerKind
		shipped string
		launch  providerLaunch
	}{
		{providerHTTP, shippedConfig, providerLaunch{kind: providerHTTP, endpoints: []string{"http://127.0.0.1:7001"}}},
		{providerHTTP, shippedConfig, providerLaunch{kind: providerHTTP, endpoints: []string{"http://127.0.0.1:7001"}, query: "group=eu-1"}},
		{providerPlugin, shippedPluginConfig, providerLaunch{kind: providerPlugin, endpoints: []string{"http://127.0.0.1:7001", "http://127.0.0.1:7002"},
			plugin: map[string]any{"group": "eu-1"}}},
	} {
		t.Run(string(tc.kind)+"/"+tc.launch.query, func(t *testing.T) {
			raw, err := os.ReadFile(tc.shipped)
			if err != nil {
				t.Fatal(err)
			}
			out, err := providerStatic(raw, tc.launch, 1111, 2222, 3333)
			got, orig := yamlMap(t, out, err), yamlMap(t, raw, nil)
			wantDiffer(t, got, map[string]any{
				"entryPoints.web.address":       "127.0.0.1:1111",
				"entryPoints.websecure.address": "127.0.0.1:2222",
				"entryPoints.traefik.address":   "127.0.0.1:3333",
				"api.insecure":                  true,
			})
			wantShipped(t, got, orig, "entryPoints.web.http", "entryPoints.websecure.http", "providers.providersThrottleDuration", "global", "log")
			if _, ok := got["certificatesResolvers"]; ok {
				t.Error("certificatesResolvers kept: the bench must not reach ACME")
			}
			switch tc.kind {
			case providerHTTP:
				wantQuery := "prefer=self" // as shipped
				if tc.launch.query != "" {
					wantQuery = tc.launch.query
				}
				if g := dig(got, "providers", "http", "endpoint"); g != "http://127.0.0.1:7001/v1/ingress/traefik?"+wantQuery {
					t.Errorf("endpoint %v", g)
				}
				if g := dig(got, "providers", "http", "headers", "Authorization"); g != "Bearer "+benchIngressToken {
					t.Errorf("Authorization %v", g)
				}
				for _, k := range []string{"pollInterval", "pollTimeout"} {
					if g, o := dig(got, "providers", "http", k), dig(orig, "providers", "http", k); g != o {
						t.Errorf("providers.http.%s = %v, shipped %v", k, g, o)
					}
				}
			case providerPlugin:
				plug := dig(got, "providers", "plugin", pluginKey).(map[string]any)
				if !reflect.DeepEqual(plug["endpoints"], []any{"http://127.0.0.1:7001", "http://127.0.0.1:7002"}) {
					t.Errorf("endpoints %v", plug["endpoints"])
				}
				if _, ok := plug["prefer"]; ok {
					t.Error("the shipped placeholder prefer is kept")
				}
				if plug["group"] != "eu-1" {
					t.Errorf("extra setting group = %v", plug["group"])
				}
				if _, ok := plug["token"]; ok {
					t.Error("a token in the plugin's settings: it comes from the environment")
				}
				for _, k := range []string{"watch", "watchWait", "pollInterval", "pollTimeout"} {
					if g, o := plug[k], dig(orig, "providers", "plugin", pluginKey, k); g != o {
						t.Errorf("providers.plugin.%s.%s = %v, shipped %v", pluginKey, k, g, o)
					}
				}
			}
		})
	}
	raw, _ := os.ReadFile(shippedConfig)
	if _, err := providerStatic(raw, providerLaunch{kind: "file", endpoints: []string{"http://x"}}, 1, 2, 3); err == nil {
		t.Error("an unknown provider kind was accepted")
	}
	if _, err := providerStatic(raw, providerLaunch{kind: providerHTTP}, 1, 2, 3); err == nil {
		t.Error("no endpoints was accepted")
	}
	if _, err := providerStatic([]byte(strings.Replace(string(raw), "  http:\n    # prefer=self", "  httpx:\n    # prefer=self", 1)),
		providerLaunch{kind: providerHTTP, endpoints: []string{"http://x"}}, 1, 2, 3); err == nil || !strings.Contains(err.Error(), "providers.http") {
		t.Errorf("a shipped file without providers.http: err %v", err)
	}
}

// The generated fleet derives to a route per application, the flip host's prefix on the
// first target, and the flip participants on their own listeners (an application in a
// group gets platform hosts only under its group's domains: TestGroupsHarnessSplitsTheFleet
// derives a grouped fleet).
func TestFlipFleetDerivesWithTheFlipHostOnItsOwnListeners(t *testing.T) {
	b, now := flipBackends(30001, 30002), time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	objs, err := fleetObjects(fleetSpec{apps: 100}, b, now)
	if err != nil {
		t.Fatal(err)
	}
	st := decodeFleetObjects(t, objs)
	// Live for the bench nodes' TTL from their generation (never stale during a run), and
	// never dated ahead.
	for _, n := range st.Nodes {
		if !fleet.NodeLive(n.Seen, now.Add(benchNodeTTL-time.Minute), benchNodeTTL) || n.Seen.After(now) {
			t.Errorf("%s: seen %s, want live for %s from %s and not ahead", n.Name, n.Seen, benchNodeTTL, now)
		}
	}
	doc, skipped := fleet.Derive(st, fleet.Options{PlatformDomains: []string{platformDomain}, APIPublic: true, NodeTTL: benchNodeTTL, Now: now.Add(time.Hour)})
	if len(skipped) > 0 {
		t.Errorf("skipped: %v", skipped)
	}
	routes := map[string]int{}
	for i, r := range doc.Routes {
		routes[r.Host] = i
	}
	for i := range 100 {
		if _, ok := routes[appName(i)+"."+platformDomain]; !ok {
			t.Errorf("no route for %s", appName(i))
		}
	}
	fr, ok := routes[flipHost]
	if !ok {
		t.Fatalf("no route for %s", flipHost)
	}
	if got := doc.Routes[fr].Paths; !reflect.DeepEqual(got, map[string]string{flipPrefix: flipTargets[0] + "." + platformDomain}) {
		t.Errorf("%s paths %v (a path-map target outside the owner's account contributes nothing)", flipHost, got)
	}
	for i := 0; isFlipParticipant(i); i++ {
		r := doc.Routes[routes[appName(i)+"."+platformDomain]]
		if len(r.Upstreams) != 2 {
			t.Fatalf("%s: %d upstreams", appName(i), len(r.Upstreams))
		}
		for j, u := range r.Upstreams {
			want := "127.0.0.1:" + itoa(b.identity[identityName(appName(i), placementOf(i)[j])])
			if u.Node != placementOf(i)[j] || u.Address != want {
				t.Errorf("%s upstream %d: %s %s, want %s %s", appName(i), j, u.Node, u.Address, placementOf(i)[j], want)
			}
		}
	}
	if r := doc.Routes[routes[appName(50)+"."+platformDomain]]; r.Upstreams[0].Address != "127.0.0.1:30001" && r.Upstreams[0].Address != "127.0.0.1:30002" {
		t.Errorf("%s: upstream %s, want a pool listener", appName(50), r.Upstreams[0].Address)
	}
	if _, err := fleetObjects(fleetSpec{apps: 2}, b, now); err == nil {
		t.Error("a fleet of 2 applications (no room for the flip participants) was accepted")
	}
}

func TestMetricParsersReadLabelledAndPlainSamples(t *testing.T) {
	text := `# HELP minio_api_requests_total x
minio_api_requests_total{name="GetObject",server="127.0.0.1:1",type="s3"} 28
minio_api_requests_total{name="ListObjectsV2",server="127.0.0.1:1",type="s3"} 12
minio_api_requests_total{name="GetObject",server="127.0.0.1:1",type="other"} 99
minio_api_requests_total_extra{name="GetObject",type="s3"} 5
scafo_reconcile_duration_seconds_sum 1.5
scafo_reconcile_duration_seconds_count 30
scafo_ingress_polls_total{code="200",format="traefik"} 7
scafo_ingress_polls_total{code="304",format="traefik"} 3
`
	if got := labelledCounts(text, "minio_api_requests_total", "name", `type="s3"`); !reflect.DeepEqual(got, map[string]float64{"GetObject": 28, "ListObjectsV2": 12}) {
		t.Errorf("labelledCounts = %v", got)
	}
	if got := metricSum(text, "scafo_ingress_polls_total"); got != 10 {
		t.Errorf("polls = %v, want 10", got)
	}
	if got := metricSum(text, "scafo_reconcile_duration_seconds_count"); got != 30 {
		t.Errorf("count = %v, want 30", got)
	}
	if got := diffCounts(map[string]float64{"a": 5, "b": 2}, map[string]float64{"a": 3, "b": 2}); !reflect.DeepEqual(got, map[string]float64{"a": 2}) {
		t.Errorf("diffCounts = %v", got)
	}
	ds := []time.Duration{5, 1, 4, 2, 3}
	if pct(ds, 50) != 3 || pct(ds, 95) != 5 || pct(ds, 100) != 5 || pct(nil, 50) != 0 {
		t.Errorf("pct: p50 %v p95 %v", pct(ds, 50), pct(ds, 95))
	}
	if thousands(10000) != "10 000" || thousands(100) != "100" || thousands(1000) != "1 000" {
		t.Errorf("thousands: %q %q %q", thousands(10000), thousands(100), thousands(1000))
	}
}

// The groups measurement's split (issue 17 item 5): contiguous groups of equal size, the
// flip participants all in g0, observers on distinct groups other than g0, and a derived
// grouped fleet whose routes carry their application's group.
func TestGroupsHarnessSplitsTheFleet(t *testing.T) {
	const apps, groups = 10000, 10
	of := groupOfApp(apps, groups)
	sizes := map[string]int{}
	prev := 0
	for i := range apps {
		g := of(i)
		sizes[g]++
		if k := groupIndex(g); k < prev || groupName(k) != g {
			t.Fatalf("application %d in %s after group g%d: not contiguous", i, g, prev)
		} else {
			prev = k
		}
	}
	for k := range groups {
		if sizes[groupName(k)] != apps/groups {
			t.Errorf("%s holds %d applications, want %d", groupName(k), sizes[groupName(k)], apps/groups)
		}
	}
	for i := 0; isFlipParticipant(i); i++ {
		if of(i) != "g0" {
			t.Errorf("flip participant %s in %s, want g0", appName(i), of(i))
		}
	}
	for _, tc := range []struct{ groups, observers, want int }{{10, 2, 2}, {10, 9, 9}, {10, 20, 9}, {2, 1, 1}, {3, 1, 1}} {
		obs := observedGroups(tc.groups, tc.observers)
		seen := map[int]bool{}
		for _, k := range obs {
			if k < 1 || k >= tc.groups || seen[k] {
				t.Errorf("observedGroups(%d, %d) = %v: want distinct groups in 1..%d", tc.groups, tc.observers, obs, tc.groups-1)
			}
			seen[k] = true
		}
		if len(obs) != tc.want {
			t.Errorf("observedGroups(%d, %d) = %v, want %d groups", tc.groups, tc.observers, obs, tc.want)
		}
	}

	b, now := flipBackends(30001), time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	objs, err := fleetObjects(fleetSpec{apps: 100, group: groupOfApp(100, 10)}, b, now)
	if err != nil {
		t.Fatal(err)
	}
	st := decodeFleetObjects(t, objs)
	opt := fleet.Options{APIPublic: true, NodeTTL: benchNodeTTL, Now: now.Add(time.Hour), DomainGroups: map[string]string{}}
	args := groupNodeArgs([]string{"--listen=x", "--platform.domains=" + platformDomain}, 10)
	if args[0] != "--listen=x" || len(args) != 3 {
		t.Errorf("groupNodeArgs: %q", args)
	}
	for k := range 10 {
		opt.PlatformDomains = append(opt.PlatformDomains, groupDomain(k))
		opt.DomainGroups[groupDomain(k)] = groupName(k)
		if !strings.Contains(args[1], groupDomain(k)) || !strings.Contains(args[2], groupDomain(k)+"="+groupName(k)) {
			t.Errorf("groupNodeArgs lacks %s: %q", groupDomain(k), args)
		}
	}
	doc, skipped := fleet.Derive(st, opt)
	if len(skipped) > 0 {
		t.Errorf("skipped: %v", skipped)
	}
	perGroup := map[string]int{}
	for _, r := range doc.Routes {
		if r.Host == flipHost {
			if r.Group != "g0" {
				t.Errorf("%s in group %q, want g0 (its owner's)", r.Host, r.Group)
			}
			continue
		}
		app, domain, _ := strings.Cut(r.Host, ".")
		var i int
		if _, err := fmt.Sscanf(app, "app-%05d", &i); err != nil {
			continue // the API apex and the like
		}
		want := groupOfApp(100, 10)(i)
		if r.Group != want && !(want == "g0" && r.Group == "") {
			t.Errorf("%s in group %q, want %q", r.Host, r.Group, want)
		}
		if domain != "example.org" && domain != groupDomain(groupIndex(want)) {
			t.Errorf("%s: platform host outside its group's domain %s", r.Host, groupDomain(groupIndex(want)))
		}
		perGroup[r.Group]++
	}
	if len(perGroup) != 10 {
		t.Errorf("routes in %d groups (%v), want 10", len(perGroup), perGroup)
	}
}

// flipBackends is a pool of listeners and one per flip participant's instance.
func flipBackends(pool ...int) *fleetBackends {
	b := &fleetBackends{pool: pool, identity: map[string]int{}}
	for i := 0; isFlipParticipant(i); i++ {
		for _, n := range placementOf(i) {
			b.identity[identityName(appName(i), n)] = 31000 + len(b.identity)
		}
	}
	return b
}

// decodeFleetObjects decodes the generated store objects into the fleet state Derive
// takes; a key outside apps/, domains/ and nodes/ is an error.
func decodeFleetObjects(t *testing.T, objs map[string][]byte) fleet.State {
	t.Helper()
	var st fleet.State
	for k, v := range objs {
		var err error
		switch {
		case strings.HasPrefix(k, fleet.PrefixApps):
			var a fleet.App
			err = json.Unmarshal(v, &a)
			st.Apps = append(st.Apps, a)
		case strings.HasPrefix(k, fleet.PrefixDomains):
			var c fleet.Claim
			err = json.Unmarshal(v, &c)
			st.Claims = append(st.Claims, c)
		case strings.HasPrefix(k, fleet.PrefixNodes):
			var n fleet.NodeRecord
			err = json.Unmarshal(v, &n)
			st.Nodes = append(st.Nodes, n)
		default:
			t.Errorf("unexpected key %s", k)
		}
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	return st
}

func TestNginxConfigKeepsEverythingUnderItsPrefix(t *testing.T) {
	conf := nginxConfig("/tmp/x", 2, "server {}")
	for _, want := range []string{"pid /tmp/x/nginx.pid;", "error_log /tmp/x/error.log", "daemon off;",
		"client_body_temp_path /tmp/x/tmp/body;", "proxy_temp_path /tmp/x/tmp/proxy;",
		"fastcgi_temp_path /tmp/x/tmp/fastcgi;", "uwsgi_temp_path /tmp/x/tmp/uwsgi;", "scgi_temp_path /tmp/x/tmp/scgi;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("configuration lacks %q:\n%s", want, conf)
		}
	}
	for _, line := range strings.Split(conf, "\n") {
		if strings.Contains(line, "/var/") || strings.Contains(line, "/run/") {
			t.Errorf("configuration points outside its prefix: %q", line)
		}
	}
}

func TestParsePerfReportKeepsSymbolsAndSpace(t *testing.T) {
	out := []byte(`# Samples: 5K of event 'cpu-clock:ppp'
#
# Overhead  Shared Object      Symbol
# ........  .................  ......
#
    31.20%  [kernel.kallsyms]  [k] copy_user_enhanced_fast_string
     4.10%  scafo-node         [.] runtime.memmove - -
     0.90%  scafo-node         [.] net/http.(*conn).serve
`)
	got := parsePerfReport(out, 2)
	want := []string{
		"| 31.20% | kernel | [kernel.kallsyms] | `copy_user_enhanced_fast_string` |",
		"| 4.10% | user | scafo-node | `runtime.memmove` |",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parsePerfReport:\n got %q\nwant %q", got, want)
	}
}

func TestTraefikStaticSwapsOnlyAddressesAndTheProvider(t *testing.T) {
	shipped, err := os.ReadFile(shippedConfig)
	if err != nil {
		t.Fatal(err)
	}
	orig := yamlMap(t, shipped, nil)
	for _, idle := range []int{0, 500} {
		out, err := traefikStatic(shipped, 1111, 2222, "/x/dynamic.yaml", idle)
		got := yamlMap(t, out, err)
		wantDiffer(t, got, map[string]any{
			"entryPoints.web.address":       "127.0.0.1:1111",
			"entryPoints.websecure.address": "127.0.0.1:2222",
			"providers.file.filename":       "/x/dynamic.yaml",
			"providers.file.watch":          true,
		})
		wantShipped(t, got, orig, "entryPoints.web.http", "entryPoints.websecure.http", "providers.providersThrottleDuration", "serversTransport.forwardingTimeouts")
		if dig(got, "providers", "http") != nil || got["certificatesResolvers"] != nil {
			t.Error("the HTTP provider or certificatesResolvers kept: the bench must not reach ACME")
		}
		if idle == 0 {
			wantShipped(t, got, orig, "serversTransport")
		} else if n := dig(got, "serversTransport", "maxIdleConnsPerHost"); n != idle {
			t.Errorf("serversTransport.maxIdleConnsPerHost = %v, want %d", n, idle)
		}
	}
}

// yamlMap decodes b (err is the error of whatever produced it).
func yamlMap(t *testing.T, b []byte, err error) map[string]any {
	t.Helper()
	var m map[string]any
	if err == nil {
		err = yaml.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantDiffer wants each dotted key of got to hold its value.
func wantDiffer(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for keys, w := range want {
		if g := dig(got, strings.Split(keys, ".")...); g != w {
			t.Errorf("%s = %v, want %v", keys, g, w)
		}
	}
}

// wantShipped wants each dotted key of got to hold what the shipped orig holds.
func wantShipped(t *testing.T, got, orig map[string]any, keys ...string) {
	t.Helper()
	for _, key := range keys {
		k := strings.Split(key, ".")
		if !reflect.DeepEqual(dig(got, k...), dig(orig, k...)) {
			t.Errorf("%s changed: %v, shipped %v", key, dig(got, k...), dig(orig, k...))
		}
	}
}

func TestParseWrkReadsRateLatencyAndErrors(t *testing.T) {
	const sample = `Running 10s test @ http://127.0.0.1:7400/v1/ingress/traefik
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.12ms    2.01ms  40.10ms   88.00%
    Req/Sec     3.15k   210.00     3.60k    70.00%
  Latency Distribution
     50%    4.80ms
     75%    5.90ms
     90%    7.20ms
     99%   12.34ms
  62731 requests in 10.01s, 1.20GB read
  Socket errors: connect 0, read 0, write 0, timeout 3
  Non-2xx or 3xx responses: 17
Requests/sec:   6266.83
Transfer/sec:    122.70MB
`
	r, err := parseWrk(sample)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{requests: 62731, reqPerSec: 6266.83, p50: 4800 * time.Microsecond, p99: 12340 * time.Microsecond,
		non2xx: 17, socketErrors: "connect 0, read 0, write 0, timeout 3", transfer: "122.70MB"}
	if r != want {
		t.Errorf("parseWrk:\n got %+v\nwant %+v", r, want)
	}
	for _, out := range []string{"", "Requests/sec: 10.0\n"} {
		if _, err := parseWrk(out); err == nil {
			t.Errorf("parseWrk accepted %q (no latency distribution)", out)
		}
	}
}
