package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/traefikprovider"
	"github.com/scafo/ingress/traefikprovider/localplugin"
)

// Scenarios 12–14: Traefik v3.6.12 loading the scafo provider plugin from
// experimental.localPlugins, on deploy/traefik/traefik-plugin.yml.

// Fast checks of traefik-plugin.yml (no binaries; they run under -short).

// topLevelBlocks splits a YAML file into its top-level sections, by key: each is the
// key's line and every line up to the next top-level key, minus trailing blank lines
// and column-0 comments (those introduce the next section). The text is compared
// verbatim, comments included.
func topLevelBlocks(text string) map[string]string {
	blocks := map[string]string{}
	var key string
	var lines []string
	flush := func() {
		for len(lines) > 0 {
			last := lines[len(lines)-1]
			if strings.TrimSpace(last) != "" && !strings.HasPrefix(last, "#") {
				break
			}
			lines = lines[:len(lines)-1]
		}
		if key != "" {
			blocks[key] = strings.Join(lines, "\n")
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if line != "" && line[0] != ' ' && line[0] != '#' {
			flush()
			key, _, _ = strings.Cut(line, ":")
			lines = nil
		}
		lines = append(lines, line)
	}
	flush()
	return blocks
}

// The plugin file is traefik.yml with another provider: the sections the two share are
// the same text, so a change to one that is not made to the other fails here.
func TestPluginConfigSharesTheShippedTextWithTraefikYml(t *testing.T) {
	httpBlocks, pluginBlocks := topLevelBlocks(string(readFile(t, shippedConfig))), topLevelBlocks(string(readFile(t, shippedPluginConfig)))
	for _, key := range []string{"global", "log", "accessLog", "entryPoints", "serversTransport", "certificatesResolvers", "api"} {
		if httpBlocks[key] == "" {
			t.Errorf("%s has no top-level %s", shippedConfig, key)
			continue
		}
		if pluginBlocks[key] != httpBlocks[key] {
			t.Errorf("top-level %s differs between %s and %s: keep them the same text\n--- %s\n%s\n--- %s\n%s",
				key, shippedConfig, shippedPluginConfig, shippedConfig, httpBlocks[key], shippedPluginConfig, pluginBlocks[key])
		}
	}
	for key := range pluginBlocks {
		switch key {
		case "global", "log", "accessLog", "entryPoints", "serversTransport", "certificatesResolvers", "api", "providers", "experimental":
		default:
			t.Errorf("%s has a top-level %s that the suite does not compare with %s", shippedPluginConfig, key, shippedConfig)
		}
	}

	httpCfg, pluginCfg := loadShipped(t), yamlMap(t, readFile(t, shippedPluginConfig))
	if a, b := dig(httpCfg, "providers", "providersThrottleDuration"), dig(pluginCfg, "providers", "providersThrottleDuration"); a != b || a == nil {
		t.Errorf("providers.providersThrottleDuration: %v in traefik.yml, %v in traefik-plugin.yml; want the same", a, b)
	}
	// The operator's directory, the same for either provider (docs/traefik.md).
	if a, b := dig(httpCfg, "providers", "file"), dig(pluginCfg, "providers", "file"); !reflect.DeepEqual(a, b) || a == nil {
		t.Errorf("providers.file: %v in traefik.yml, %v in traefik-plugin.yml; want the same", a, b)
	}
	// The parsed entry points too (the alias *pathSafety must resolve the same way).
	if a, b := dig(httpCfg, "entryPoints"), dig(pluginCfg, "entryPoints"); !reflect.DeepEqual(a, b) {
		t.Errorf("entryPoints parse differently: %v vs %v", a, b)
	}
}

func TestShippedPluginConfigLoadsTheLocalPluginWithTheTokenFromTheEnvironment(t *testing.T) {
	cfg := yamlMap(t, readFile(t, shippedPluginConfig))
	if got := dig(cfg, "experimental", "localPlugins", pluginName, "moduleName"); got != localplugin.ModuleName {
		t.Errorf("experimental.localPlugins.%s.moduleName = %v, want %s", pluginName, got, localplugin.ModuleName)
	}
	m, err := localplugin.ReadManifest(traefikproviderDir(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Import != localplugin.ModuleName {
		t.Errorf("the plugin's manifest imports %q, the configuration loads %q", m.Import, localplugin.ModuleName)
	}
	if got := dig(cfg, "providers", "http"); got != nil {
		t.Errorf("providers.http = %v: the plugin file must have one provider", got)
	}
	plug, ok := dig(cfg, "providers", "plugin", pluginName).(map[string]any)
	if !ok {
		t.Fatalf("no providers.plugin.%s", pluginName)
	}
	if eps, _ := plug["endpoints"].([]any); len(eps) < 2 {
		t.Errorf("providers.plugin.%s.endpoints = %v, want several nodes", pluginName, plug["endpoints"])
	}
	if plug["watch"] != true {
		t.Errorf("providers.plugin.%s.watch = %v, want true", pluginName, plug["watch"])
	}
	if _, ok := plug["token"]; ok {
		t.Errorf("providers.plugin.%s.token is set: the token must come from the environment, not the file", pluginName)
	}
	if v, ok := plug["tokenEnv"]; ok && v != traefikprovider.DefaultTokenEnv {
		t.Errorf("providers.plugin.%s.tokenEnv = %v, want %s (what ingress.env sets)", pluginName, v, traefikprovider.DefaultTokenEnv)
	}

	// The plugin itself accepts the settings, with the token from SCAFO_INGRESS_TOKEN.
	// Traefik decodes the map over CreateConfig() case-insensitively; the JSON names
	// of Config are the settings' names.
	raw, err := json.Marshal(plug)
	if err != nil {
		t.Fatal(err)
	}
	pc := traefikprovider.CreateConfig()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(pc); err != nil {
		t.Fatalf("providers.plugin.%s: %v", pluginName, err)
	}
	t.Setenv(traefikprovider.DefaultTokenEnv, "")
	if _, err := traefikprovider.New(context.Background(), pc, pluginProvider); err == nil || !strings.Contains(err.Error(), traefikprovider.DefaultTokenEnv) {
		t.Errorf("with %s empty: err %v, want one naming the variable", traefikprovider.DefaultTokenEnv, err)
	}
	t.Setenv(traefikprovider.DefaultTokenEnv, testIngressToken)
	if _, err := traefikprovider.New(context.Background(), pc, pluginProvider); err != nil {
		t.Errorf("the plugin rejects the shipped settings: %v", err)
	}
}

func traefikproviderDir(t *testing.T) string {
	t.Helper()
	dir, err := localplugin.SourceDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// The suite's plugin Traefik runs the shipped settings: pluginStaticConfig moves listen
// addresses, sets endpoints and prefer, drops the ACME resolver and adds the API.
func TestPluginStaticConfigKeepsTheShippedSettings(t *testing.T) {
	shippedBytes := readFile(t, shippedPluginConfig)
	shipped := yamlMap(t, shippedBytes)
	got := parsed(t)(pluginStaticConfig(shippedBytes, pluginOverrides{
		ports:     traefikPorts{web: 1001, websecure: 1002, api: 1003},
		endpoints: []string{"http://127.0.0.2:7001", "http://127.0.0.3:7002"},
		prefer:    "n1",
	}))
	const plug = "providers.plugin." + pluginName
	requireUnchanged(t, got, shipped, "entryPoints.web.http", "entryPoints.websecure.http", "experimental", "providers.providersThrottleDuration",
		plug+".watch", plug+".watchWait", plug+".pollInterval", plug+".pollTimeout", "global", "api.dashboard")
	requireKeys(t, got, loopbackKeys(1001)...)
	requireKeys(t, got, keyWant{plug + ".endpoints", []any{"http://127.0.0.2:7001", "http://127.0.0.3:7002"}},
		keyWant{plug + ".prefer", "n1"}, keyWant{plug + ".appliedProbe", "http://127.0.0.1:1001"}, keyWant{plug + ".token", nil})

	got = parsed(t)(pluginStaticConfig(shippedBytes, pluginOverrides{ports: traefikPorts{web: 1, websecure: 2, api: 3}, endpoints: []string{"http://127.0.0.2:7001"}}))
	if _, ok := dig(got, "providers", "plugin", pluginName).(map[string]any)["prefer"]; ok {
		t.Error("an empty prefer override left providers.plugin.scafo.prefer in place")
	}

	for _, tc := range []struct {
		name, from, to, wantErr string
	}{
		{"no plugin section", "  plugin:\n", "  pluginx:\n", "no providers.plugin.scafo"},
		{"no prefer to replace", "      prefer:", "      preferx:", "providers.plugin.scafo.prefer"},
		{"another module", "moduleName: github.com/scafo/ingress/traefikprovider", "moduleName: example.com/other", "moduleName"},
		{"no resolver", "certificatesResolvers:", "certificatesResolverx:", "certificatesResolvers"},
		{"a probe off the web entry point", `appliedProbe: "http://127.0.0.1:80"`, `appliedProbe: "http://127.0.0.1:443"`, "appliedProbe"},
		{"no probe", `appliedProbe: "http://127.0.0.1:80"`, `appliedDelay: 500ms`, "appliedProbe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := strings.Replace(string(shippedBytes), tc.from, tc.to, 1)
			if changed == string(shippedBytes) {
				t.Fatalf("%q not found in the shipped file", tc.from)
			}
			_, err := pluginStaticConfig([]byte(changed), pluginOverrides{ports: traefikPorts{web: 1, websecure: 2, api: 3}, endpoints: []string{"http://127.0.0.2:7001"}, prefer: "n1"})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// Scenario 12 (a, c): the node the plugin reads from dies; routing continues, and later
// changes, made through the surviving node, are followed. Then scenario 13: a Traefik
// started while that node is down.
func TestPluginKeepsRoutingAndFollowsChangesWhenItsNodeDies(t *testing.T) {
	f := startFleet(t, 2, nodeOptions{})
	n1, n2 := f.nodes[0], f.nodes[1]
	both := []*node{n1, n2}
	f.deploy(t, "shop", "acme", both, "/healthz")
	f.deploy(t, "site", "acme", both, "/healthz")
	f.deploy(t, "blog", "acme", both, "/healthz")
	const host, pathHost, target = "shop.apps.localhost", "paths.example.org", "blog.apps.localhost"
	n1.claim(t, "site", pathHost)

	tr := startPluginTraefik(t, "traefik-plugin", pluginTraefikOptions{endpoints: both, prefer: "n1"})
	tr.waitServedBy(t, host, "/", "shop@n1", routeTimeout)
	tr.waitServedBy(t, pathHost, "/b", "site@n1", routeTimeout)
	if p1, p2 := n1.ingressPolls(t), n2.ingressPolls(t); p1 == 0 || p2 != 0 {
		t.Fatalf("before the kill: %d polls answered by n1 and %d by n2; want the plugin on n1 alone", p1, p2)
	}
	before := tr.routerCount(pluginProvider)
	// The claim went through n1; n2 folds it in on its next reconcile tick. Kill n1 only
	// once both serve the same revision, or the plugin would (correctly) hold n2's
	// older configuration back until n2 caught up (X-Scafo-Serial; scenario 17).
	waitFor(t, "n1 and n2 to serve one revision", routeTimeout, func() error {
		if a, b := n1.ingress(t, "", "identity").revision, n2.ingress(t, "", "identity").revision; a != b {
			return fmt.Errorf("n1 %s, n2 %s", a, b)
		}
		return nil
	})

	loop := startLoop(t, tr, host, "/", 20*time.Millisecond)
	floor := watchRouters(t, tr, pluginProvider)
	logFrom := tr.proc.LogSize()
	t0 := time.Now()
	n1.proc.Kill() // SIGKILL: the long-poll's connection dies with it
	if err := tr.proc.WaitLog(20*time.Second, logFrom, "switching to "+nodeBase(n2)); err != nil {
		t.Fatalf("waiting for the plugin to log its switch to n2: %v", err)
	}
	switched := time.Since(t0)
	// Keep the traffic going for a while on the survivor's configuration (about a
	// second at one request every 20 ms) before changing anything.
	const afterKill = 50
	waitFor(t, fmt.Sprintf("%d requests through Traefik after the kill", afterKill), 20*time.Second, func() error {
		if n := len(loop.since(t0)); n < afterKill {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	})

	// Later changes, published through the survivor, reach Traefik. n1's instances
	// stay in the lists (its record is not stale yet) and lead them (prefer=n1). The
	// first change adds routers, so the router floor and the request loop end there.
	var follow []time.Duration
	for i, step := range []struct {
		paths map[string]string
		want  string
	}{
		{map[string]string{"b": target}, "blog@n1"},
		{map[string]string{}, "site@n1"},
		{map[string]string{"b": target}, "blog@n1"},
	} {
		n2.putPaths(t, "site", pathHost, step.paths)
		tc := time.Now()
		follow = append(follow, firstServed(t, []*traefik{tr}, pathHost, "/b", []string{step.want}, tc)[0])
		if i == 0 {
			loop.stop()
			floor.stop()
		}
	}
	if n2.ingressPolls(t) == 0 {
		t.Error("n2 answered no poll after the switch")
	}

	sent, failures := loop.notFrom(t0, "shop@n1")
	low, samples, apiErrors := floor.result()
	t.Logf("n1 killed: switch to n2 logged after %s; %d requests through Traefik, %d failed %v; routers from the plugin: %d before, at least %d in %d samples",
		ms(switched), sent, len(failures), failures, before, low, samples)
	t.Logf("changes through n2 after the kill, PUT acknowledged → first request served: %v", roundAll(follow))
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed after the node the plugin read from died, want 0", len(failures), sent)
	}
	if apiErrors > 0 {
		t.Errorf("Traefik's API failed %d times", apiErrors)
	}
	if low < before {
		t.Errorf("Traefik withdrew routes: %d routers from the plugin at the low point, %d before", low, before)
	}
	results.add("Scenario 12: provider plugin, the node it reads from dies",
		"Two nodes on one dir store; Traefik on `traefik-plugin.yml` with `endpoints: [n1, n2]`, `prefer: n1`, `watch: true`; "+
			"n1 (which the plugin was long-polling) is SIGKILLed under a request every 20 ms.",
		"",
		fmt.Sprintf("- switch to n2 logged by the plugin %s after the kill", ms(switched)),
		fmt.Sprintf("- %d requests through Traefik from the kill on, %d failed; routers from the plugin never below %d (%d before)", sent, len(failures), low, before),
		fmt.Sprintf("- path-map changes PUT through n2 afterwards, acknowledged → first request served by the new target: %v", roundAll(follow)),
	)
	tr.requireProviderClean(t, pluginProvider)

	// Scenario 13 (b, c): with n1 still down, a plugin Traefik started now on the same
	// endpoints gets its routes from the second (in a fresh directory, so no state file:
	// n2 is the only source); the built-in HTTP provider pointed at n1 gets none.
	httpTr := startTraefik(t, "traefik-http", traefikOptions{node: n1})
	t1 := time.Now()
	late := startPluginTraefik(t, "traefik-plugin-late", pluginTraefikOptions{endpoints: both, prefer: "n1"})
	late.waitServedBy(t, host, "/", "shop@n1", routeTimeout)
	firstRoute := time.Since(t1)
	if !strings.Contains(late.proc.Output(), "switching to "+nodeBase(n2)) {
		t.Errorf("the plugin started with n1 down did not log its switch from n1 to n2")
	}
	if err := httpTr.proc.WaitLog(20*time.Second, 0, "cannot fetch configuration data"); err != nil {
		t.Fatalf("waiting for the HTTP provider to fail a poll of the dead node: %v", err)
	}
	if n := httpTr.routerCount("http"); n != 0 {
		t.Errorf("the HTTP provider polling the dead n1 has %d routers, want 0", n)
	}
	httpTr.expectTraefik404(t, host, "/")
	t.Logf("Traefik process start → first request routed, with n1 down: %s (plugin); the HTTP provider on n1: no routes", ms(firstRoute))
	results.add("Scenario 13: provider plugin, first endpoint down at start",
		fmt.Sprintf("n1 dead, then Traefik started with `endpoints: [n1, n2]`: first request routed %s after the Traefik process started "+
			"(Traefik's own start included). A second Traefik with the built-in HTTP provider on n1: no routes, Traefik's 404.", ms(firstRoute)),
	)
	late.requireProviderClean(t, pluginProvider)
}

// Scenarios 4 and 14 (d, c): path prefixes route on exactly one whole first segment, and
// flip latency, PUT acknowledged → first request served by the new target, through the
// plugin and through the built-in HTTP provider (pollInterval 1s, shipped) side by side
// on the same node and the same flips, each way (a prefix added, then removed). The plugin's median must
// beat the HTTP provider's, measured in the same run on the same machine: a comparison
// a slow or busy machine slows on both sides, where a fixed bound would not.
func TestPluginFlipLatencyBeatsTheHTTPProvider(t *testing.T) {
	f := startFleet(t, 1, nodeOptions{})
	n1 := f.nodes[0]
	f.deploy(t, "site", "acme", []*node{n1}, "/healthz")
	f.deploy(t, "blog", "acme", []*node{n1}, "/healthz")
	const host, target = "paths.example.org", "blog.apps.localhost"
	n1.claim(t, "site", host)
	plugin := startPluginTraefik(t, "traefik-plugin", pluginTraefikOptions{endpoints: []*node{n1}, prefer: "n1"})
	httpTr := startTraefik(t, "traefik-http", traefikOptions{node: n1})
	trs := []*traefik{plugin, httpTr}

	withB := map[string]string{"b": target, "keep": target}
	withoutB := map[string]string{"keep": target}
	n1.putPaths(t, "site", host, withB)
	for _, tr := range trs {
		tr.waitServedBy(t, host, "/b", "blog@n1", routeTimeout)
	}
	// Scenario 4: a prefix is one whole first segment, matched exactly, on both
	// providers; no prefix stripping (the upstream gets the path routed on, and the Host).
	// "keep" stays flipped throughout the flips below: a republish must not disturb it.
	for _, tc := range []struct {
		path, want string
	}{
		{"/b", "blog@n1"},
		{"/b/", "blog@n1"},
		{"/b/x", "blog@n1"},
		{"/b/x/y?q=1", "blog@n1"},
		{"/b?q=1", "blog@n1"},
		{"/keep", "blog@n1"},
		{"/bat", "site@n1"}, // a whole segment, not a string prefix
		{"/b.", "site@n1"},
		{"/b-x", "site@n1"},
		{"/", "site@n1"},
		{"/c", "site@n1"},
		{"/c/b", "site@n1"}, // only the first segment selects
		{"/B", "site@n1"},   // prefixes are lowercase; paths are case-sensitive
		{"/keepx", "site@n1"},
	} {
		for _, tr := range trs {
			r := tr.expectServedBy(t, host, tc.path, tc.want)
			if r.echo != nil && (r.echo.RawPath != tc.path || r.echo.Host != host) {
				t.Errorf("%s via %s: upstream saw %q on Host %q, want both unchanged", tc.path, tr.name, r.echo.RawPath, r.echo.Host)
			}
		}
	}

	// 20 flips (about 25 s): medians that hold on a noisy 2-core machine, where the HTTP
	// provider's latency is spread over its whole poll interval. The documented figures
	// (docs/traefik.md, deploy/traefik/README.md) are 20-flip runs of this test.
	const flips = 20
	var viaPlugin, viaHTTP []time.Duration
	for i := range flips {
		paths, want := withoutB, "site@n1"
		if i%2 == 1 {
			paths, want = withB, "blog@n1"
		}
		// De-phase from the HTTP provider's 1 s poll; the plugin has no phase.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		n1.putPaths(t, "site", host, paths)
		t0 := time.Now()
		d := firstServed(t, trs, host, "/b", []string{want, want}, t0)
		viaPlugin, viaHTTP = append(viaPlugin, d[0]), append(viaHTTP, d[1])
		for _, tr := range trs {
			tr.expectServedBy(t, host, "/keep", "blog@n1")
		}
	}
	p := func(ds []time.Duration, q float64) time.Duration { return ms(percentile(ds, q)) }
	t.Logf("plugin (watch):            p50 %s, p95 %s, max %s, all %v", p(viaPlugin, 50), p(viaPlugin, 95), p(viaPlugin, 100), viaPlugin)
	t.Logf("HTTP provider (poll 1s):   p50 %s, p95 %s, max %s, all %v", p(viaHTTP, 50), p(viaHTTP, 95), p(viaHTTP, 100), viaHTTP)
	results.add("Scenario 14: flip latency, provider plugin vs HTTP provider",
		fmt.Sprintf("%d path-map flips (add/remove prefix `b`, alternating) on one node; after each PUT is acknowledged, both Traefiks are "+
			"polled every 5 ms until the new target answers. Each PUT after a random 0–1 s pause. Both run providersThrottleDuration 100ms (shipped).", flips),
		"",
		"| provider | flips | p50 | p95 | max |",
		"|---|---|---|---|---|",
		fmt.Sprintf("| plugin (`traefik-plugin.yml`, watch) | %d | %s | %s | %s |", len(viaPlugin), p(viaPlugin, 50), p(viaPlugin, 95), p(viaPlugin, 100)),
		fmt.Sprintf("| built-in HTTP provider (`traefik.yml`, pollInterval 1s) | %d | %s | %s | %s |", len(viaHTTP), p(viaHTTP, 50), p(viaHTTP, 95), p(viaHTTP, 100)),
	)
	if pl, hp := percentile(viaPlugin, 50), percentile(viaHTTP, 50); pl >= hp {
		t.Errorf("plugin flip latency p50 %s is not below the HTTP provider's p50 %s on the same %d flips", ms(pl), ms(hp), flips)
	}
	plugin.requireProviderClean(t, pluginProvider)
	httpTr.requireProviderClean(t, "http")
}
