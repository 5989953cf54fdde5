package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

// decodeStrict decodes a render into the types it was built from, refusing any field
// they do not declare (the json side of "never emit a field v3.6 rejects"; the
// Traefik-side check is TestOutputMatchesTraefikSchema).
func decodeStrict(t testing.TB, out []byte) Configuration {
	t.Helper()
	var cfg Configuration
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decoding the render strictly: %v", err)
	}
	if dec.More() {
		t.Fatal("trailing data after the configuration")
	}
	return cfg
}

// mustTraefik is Traefik(doc, opt), failing the test on an error.
func mustTraefik(t testing.TB, doc *routing.Document, opt Options) []byte {
	t.Helper()
	out, err := Traefik(doc, opt)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustTraefikFleet is TraefikFleet(doc, opt, fc), failing the test on an error.
func mustTraefikFleet(t testing.TB, doc *routing.Document, opt Options, fc *FleetCerts) []byte {
	t.Helper()
	out, err := TraefikFleet(doc, opt, fc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustIncremental is NewIncremental(opt), failing the test on an error.
func mustIncremental(t testing.TB, opt Options) *Incremental {
	t.Helper()
	inc, err := NewIncremental(opt)
	if err != nil {
		t.Fatal(err)
	}
	return inc
}

// TestEveryCaseSatisfiesTheChainInvariants checks, on every golden case and on a
// derived fleet in every router form, the rules a reviewer would otherwise have to
// check by eye in each file; every rule parses, and the output matches Traefik's schema.
func TestEveryCaseSatisfiesTheChainInvariants(t *testing.T) {
	schema := loadTraefikSchemaOrNil(t)
	for _, c := range append(loadCases(t), generatedCases(t)...) {
		t.Run(c.name, func(t *testing.T) {
			out := mustTraefik(t, c.doc, c.opt)
			cfg := decodeStrict(t, out)
			checkInvariants(t, c.opt, cfg)
			compileRouters(t, cfg)
			if schema != nil {
				for _, v := range schema.validate(out) {
					t.Error(v)
				}
			}
		})
	}
}

// generatedCases are a derived fleet of 300 applications (2 000 prefixes on ti.to) in
// every router form: grouped path maps, one router per prefix, TLS with platform
// wildcard certificates.
func generatedCases(t *testing.T) []loadedCase {
	gen := generatedDoc(t, 300, 2000)
	var out []loadedCase
	for _, opt := range []Options{{}, {PathGroupThreshold: routing.MaxPaths},
		{CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com"}}} {
		out = append(out, loadedCase{name: fmt.Sprintf("generated/%+v", opt), doc: gen, opt: opt})
	}
	return out
}

func checkInvariants(t *testing.T, opt Options, cfg Configuration) {
	t.Helper()
	o, err := opt.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP == nil {
		return
	}
	svcs := cfg.HTTP.Services
	isMain := map[string]bool{} // leaves some failover tries first: they have a fallback
	checked := 0
	for _, s := range svcs {
		if f := s.Failover; f != nil {
			checked++ // one main leaf per failover
		}
	}
	interval := o.interval
	if interval == "" {
		interval = AutoHealthCheckInterval(checked).String()
	}
	for name, s := range svcs {
		checkName(t, "service", name)
		if (s.LoadBalancer == nil) == (s.Failover == nil) {
			t.Errorf("service %s: must be exactly one of loadBalancer, failover", name)
			continue
		}
		if f := s.Failover; f != nil {
			if f.HealthCheck != nil {
				// Traefik would require the fallback to report status, which the
				// unchecked last leaf cannot: the whole configuration would be refused.
				t.Errorf("failover %s: healthCheck {} (its unchecked last leaf cannot report status)", name)
			}
			main, ok := svcs[f.Service]
			if !ok || main.LoadBalancer == nil || main.LoadBalancer.HealthCheck == nil {
				t.Errorf("failover %s: main %q is not a load balancer with an active health check (failover would never trigger)", name, f.Service)
			}
			if _, ok := svcs[f.Fallback]; !ok {
				t.Errorf("failover %s: fallback %q missing", name, f.Fallback)
			}
			isMain[f.Service] = true
		}
	}
	for name, s := range svcs {
		lb := s.LoadBalancer
		if lb == nil {
			continue
		}
		if lb.PassHostHeader == nil || !*lb.PassHostHeader {
			t.Errorf("load balancer %s: passHostHeader must be true", name)
		}
		if len(lb.Servers) == 0 {
			if lb.HealthCheck != nil || lb.PassiveHealthCheck != nil {
				t.Errorf("empty load balancer %s has health checks", name)
			}
			continue
		}
		if len(lb.Servers) != 1 || !strings.HasPrefix(lb.Servers[0].URL, "http://") {
			t.Errorf("leaf %s: want exactly one http:// server, got %+v", name, lb.Servers)
		}
		// A leaf with a fallback has an active and a passive check; the last
		// fallback, or a lone leaf, has neither (docs/design.md §4, "Which leaves are checked").
		hc := lb.HealthCheck
		if !isMain[name] {
			if hc != nil {
				t.Errorf("leaf %s: active health check %+v on a leaf without a fallback", name, hc)
			}
		} else if hc == nil || hc.Path == "" || hc.Interval != interval || hc.Timeout != o.timeout || hc.FollowRedirects == nil || !*hc.FollowRedirects {
			t.Errorf("leaf %s: active health check %+v, want path, interval %s, timeout %s, followRedirects true", name, hc, interval, o.timeout)
		}
		if isMain[name] != (lb.PassiveHealthCheck != nil) {
			t.Errorf("leaf %s: passive check %+v, want one exactly when the leaf has a fallback (%v)", name, lb.PassiveHealthCheck, isMain[name])
		}
		if p := lb.PassiveHealthCheck; p != nil && (p.MaxFailedAttempts != passiveMaxFailedAttempts || p.FailureWindow != passiveFailureWindow) {
			t.Errorf("leaf %s: passive check %+v", name, p)
		}
	}
	bands := []int{PriorityPath, PriorityPathGuard, PriorityHost, PriorityAPI, PriorityWildcardPath, PriorityWildcardPathGuard, PriorityWildcard}
	for name, r := range cfg.HTTP.Routers {
		checkName(t, "router", name)
		if _, ok := svcs[r.Service]; !ok {
			t.Errorf("router %s: service %q missing", name, r.Service)
		}
		if !slices.Contains(bands, r.Priority) {
			t.Errorf("router %s: priority %d is not a band", name, r.Priority)
		}
		if !slices.Equal(r.EntryPoints, o.entryPoints) {
			t.Errorf("router %s: entry points %v, want %v", name, r.EntryPoints, o.entryPoints)
		}
		if (r.TLS != nil) != (o.certResolver != "") || (r.TLS != nil && r.TLS.CertResolver != o.certResolver) {
			t.Errorf("router %s: tls %+v with certResolver %q", name, r.TLS, o.certResolver)
		}
		// Traefik takes a TLS router's Host values, negated ones too, for server names of
		// its HTTPS muxer, matched before the TCP routers (passthroughExclusion).
		if r.TLS != nil && strings.Contains(r.Rule, "!Host(") {
			t.Errorf("TLS router %s negates a Host (Traefik would claim that server name): %s", name, r.Rule)
		}
	}
	checkRetry(t, opt, cfg)
}

func checkName(t *testing.T, what, name string) {
	t.Helper()
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(isPlain(c) || c == '.' || c == '_' || c == '~') {
			t.Errorf("%s name %q: byte %q outside [a-z0-9._~-]", what, name, c)
		}
	}
}

// sampleDoc is a document exercising every part of the render: shared chains, a path
// map with both router forms, a custom wildcard, the API apex.
func sampleDoc(nPrefixes int) *routing.Document {
	ups := func(port int, nodes ...string) []routing.Upstream {
		var out []routing.Upstream
		for i, n := range nodes {
			out = append(out, routing.Upstream{Node: n, Address: fmt.Sprintf("10.83.0.%d:%d", i+1, port), APIPort: 7400})
		}
		return out
	}
	paths := map[string]string{"j.smith": "eu.tito.io", "x~y": "eu.tito.io"}
	for i := range nPrefixes {
		paths[fmt.Sprintf("acct%04d", i)] = "go.tito.io"
	}
	d := &routing.Document{
		V: routing.Version,
		Routes: []routing.Route{
			{Host: "*.shop.example.org", Application: "shop", Upstreams: ups(24417, "vps-a", "vps-b", "vps-c")},
			{Host: "eu.tito.io", Application: "tito-eu", Upstreams: ups(24700, "vps-c"), HealthPath: "/healthz"},
			{Host: "go.tito.io", Application: "tito-go", Upstreams: ups(24600, "vps-b", "vps-a")},
			{Host: "shop.apps.example.com", Application: "shop", Upstreams: ups(24417, "vps-a", "vps-b", "vps-c")},
			{Host: "ti.to", Application: "tito-classic", Upstreams: ups(24500, "vps-a", "vps-c"), Paths: paths},
		},
		API: &routing.API{
			Hosts:     []string{"apps.example.com"},
			Upstreams: ups(7400, "vps-a", "vps-b", "vps-c"),
			Denied:    slices.Clone(routing.DeniedAPIPrefixes),
		},
	}
	d.Seal()
	return d
}

// shuffled returns a deep copy of d with routes in random order and every path map
// rebuilt by inserting its keys in random order.
func shuffled(d *routing.Document, rng *rand.Rand) *routing.Document {
	out := *d
	out.Routes = slices.Clone(d.Routes)
	rng.Shuffle(len(out.Routes), func(i, j int) { out.Routes[i], out.Routes[j] = out.Routes[j], out.Routes[i] })
	for i := range out.Routes {
		r := &out.Routes[i]
		r.Upstreams = slices.Clone(r.Upstreams)
		if r.Paths == nil {
			continue
		}
		keys := make([]string, 0, len(r.Paths))
		for k := range r.Paths {
			keys = append(keys, k)
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		m := make(map[string]string, len(keys))
		for _, k := range keys {
			m[k] = r.Paths[k]
		}
		r.Paths = m
	}
	return &out
}

// TestRenderIsByteStableWhateverTheInputOrder: a document (with and without
// middlewares) renders the same bytes whatever the order of its routes and path maps,
// and the render leaves its input as it was; so does testdata/passthrough.json. (Fleet
// certificates: TestFleetCertificatesRenderSortedInlineAndByteStable; the incremental
// render: TestIncrementalRenderEqualsFullRender.)
func TestRenderIsByteStableWhateverTheInputOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	opts := []Options{{}, {PathGroupThreshold: 10},
		{CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com"}}}
	pt := passthroughCase(t)
	for _, tc := range []struct {
		doc  *routing.Document
		opts []Options
	}{{sampleDoc(100), opts}, {middlewaresDoc(100), opts}, {pt.doc, []Options{pt.opt}}} {
		doc := tc.doc
		before, err := routing.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, opt := range tc.opts {
			want := mustTraefik(t, doc, opt)
			for range 10 {
				if got, err := Traefik(shuffled(doc, rng), opt); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("options %d: a shuffled document rendered different bytes (%v)", i, err)
				}
			}
		}
		if after, _ := routing.Marshal(doc); !bytes.Equal(before, after) {
			t.Fatal("Traefik modified its input document")
		}
	}
}

// TestNothingToRouteRendersEmptyObject: Traefik's HTTP provider refuses {"http":{}}
// ("http cannot be a standalone element"), so nothing to route must be {}.
func TestNothingToRouteRendersEmptyObject(t *testing.T) {
	for name, doc := range map[string]*routing.Document{
		"no routes":         {V: 1, Routes: []routing.Route{}},
		"api without hosts": {V: 1, API: &routing.API{Upstreams: []routing.Upstream{{Node: "a", Address: "10.0.0.1:7400"}}}},
	} {
		out, err := Traefik(doc, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(out) != "{}" {
			t.Errorf("%s: got %s, want {}", name, out)
		}
	}
}

func TestPathMapSwitchesToGroupedRouterAboveThreshold(t *testing.T) {
	for _, tc := range []struct {
		threshold, prefixes int
		grouped             bool
	}{
		{threshold: 0, prefixes: 64, grouped: false}, // default 64
		{threshold: 0, prefixes: 65, grouped: true},
		{threshold: 5, prefixes: 5, grouped: false},
		{threshold: 5, prefixes: 6, grouped: true},
	} {
		out := mustTraefik(t, sampleDoc(tc.prefixes), Options{PathGroupThreshold: tc.threshold})
		cfg := decodeStrict(t, out)
		perPrefix, grouped := 0, 0
		for name := range cfg.HTTP.Routers {
			switch {
			case strings.HasPrefix(name, "path-ti_to.acct"):
				perPrefix++
			case name == "paths-ti_to.go_tito_io":
				grouped++
			}
		}
		if tc.grouped && (grouped != 1 || perPrefix != 0) || !tc.grouped && (grouped != 0 || perPrefix != tc.prefixes) {
			t.Errorf("threshold %d, %d prefixes: %d per-prefix routers, %d grouped; want grouped=%v",
				tc.threshold, tc.prefixes, perPrefix, grouped, tc.grouped)
		}
		// The other target's two prefixes stay per prefix either way.
		if _, ok := cfg.HTTP.Routers["path-ti_to.j_smith"]; !ok {
			t.Errorf("threshold %d: the small group was grouped too", tc.threshold)
		}
	}
}

// TestBadInputIsAnErrorNamingTheField: the render refuses what routing.Validate
// refuses, with its error (routing's TestDocumentValidate holds every field; that the
// incremental render refuses the same, with the same error, and renders right after is
// TestIncrementalRenderEqualsFullRender's).
func TestBadInputIsAnErrorNamingTheField(t *testing.T) {
	for field, mut := range map[string]func(d *routing.Document){
		"routes[1].host":                 func(d *routing.Document) { d.Routes[1].Host = "eu`.tito.io" },
		"routes[2].upstreams[1].apiPort": func(d *routing.Document) { d.Routes[2].Upstreams[1].APIPort = 0 },
		"api.denied[0]":                  func(d *routing.Document) { d.API.Denied = []string{"/v1/`x"} },
	} {
		d := sampleDoc(2) // a new document: the mutation writes in place
		mut(d)
		_, err := Traefik(d, Options{})
		if f, _ := routing.InvalidField(err); !errors.Is(err, routing.ErrInvalid) || f != field {
			t.Errorf("error %v names field %q, want routing.ErrInvalid naming %q", err, f, field)
		}
	}
	if _, err := Traefik(nil, Options{}); err == nil {
		t.Error("nil document: want an error")
	}
	if _, err := mustIncremental(t, Options{}).Render(Request{}); err == nil {
		t.Error("nil document, incremental render: want an error")
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opt     Options
		wantErr string
	}{
		{"zero value", Options{}, ""},
		{"everything", Options{EntryPoints: []string{"web", "websecure"}, CertResolver: "le", PlatformWildcardCerts: true,
			PlatformDomains: []string{"apps.example.com"}, HealthCheckInterval: "10s", HealthCheckTimeout: "500ms", PathGroupThreshold: 1}, ""},
		{"empty entry point", Options{EntryPoints: []string{""}}, "entryPoints[0]"},
		{"entry point with @", Options{EntryPoints: []string{"web@file"}}, "entryPoints[0]"},
		{"duplicate entry point", Options{EntryPoints: []string{"web", "web"}}, "entryPoints[1]"},
		{"resolver with space", Options{CertResolver: "le x"}, "certResolver"},
		{"wildcard certs without resolver", Options{PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com"}}, "platformWildcardCerts"},
		{"wildcard certs without domains", Options{PlatformWildcardCerts: true, CertResolver: "le"}, "platformWildcardCerts"},
		{"bad platform domain", Options{PlatformDomains: []string{"Apps.example.com"}}, "platformDomains[0]"},
		{"bad interval", Options{HealthCheckInterval: "5"}, "healthCheck.interval"},
		{"zero timeout", Options{HealthCheckTimeout: "0s"}, "healthCheck.timeout"},
		{"negative threshold", Options{PathGroupThreshold: -1}, "pathGroupThreshold"},
		{"retries off", Options{RetryAttempts: 1}, ""},
		{"two tries", Options{RetryAttempts: 2, RetryInitialInterval: "50ms"}, ""},
		{"most tries", Options{RetryAttempts: MaxRetryAttempts}, ""},
		{"longest retry interval", Options{RetryInitialInterval: "10s"}, ""},
		{"negative attempts", Options{RetryAttempts: -1}, "retry.attempts"},
		{"too many attempts", Options{RetryAttempts: MaxRetryAttempts + 1}, "retry.attempts"},
		{"retry interval no duration", Options{RetryInitialInterval: "200"}, "retry.initialInterval"},
		{"zero retry interval", Options{RetryInitialInterval: "0s"}, "retry.initialInterval"},
		{"negative retry interval", Options{RetryInitialInterval: "-1s"}, "retry.initialInterval"},
		{"retry interval too long", Options{RetryInitialInterval: "11s"}, "retry.initialInterval"},
		{"bad retry interval while off", Options{RetryAttempts: 1, RetryInitialInterval: "x"}, "retry.initialInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opt.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrOptions) {
				t.Fatalf("error %v: want ErrOptions naming %q", err, tc.wantErr)
			}
			if _, err := Traefik(sampleDoc(1), tc.opt); !errors.Is(err, ErrOptions) {
				t.Errorf("Traefik accepted options Validate refuses: %v", err)
			}
			if _, err := NewIncremental(tc.opt); !errors.Is(err, ErrOptions) {
				t.Errorf("NewIncremental accepted options Validate refuses: %v", err)
			}
		})
	}
}

// fleetDoc is n applications, each with the given number of upstreams on distinct nodes.
func fleetDoc(n, upstreams int) *routing.Document {
	d := &routing.Document{V: routing.Version}
	for i := range n {
		var ups []routing.Upstream
		for j := range upstreams {
			ups = append(ups, routing.Upstream{Node: fmt.Sprintf("vps-%d", j), Address: fmt.Sprintf("10.83.0.%d:%d", j+1, 20000+i), APIPort: 7400})
		}
		d.Routes = append(d.Routes, routing.Route{Host: fmt.Sprintf("a%05d.apps.example.com", i), Application: fmt.Sprintf("a%05d", i), Upstreams: ups})
	}
	d.Seal()
	return d
}

// The automatic interval keeps Traefik's check rate within HealthCheckBudget: one
// checked leaf per upstream but the last, none for a lone upstream; an explicit
// interval wins whatever the fleet's size. (An interval step between two renders of
// one Incremental: TestAutomaticIntervalStepRendersNoFragmentAgain.)
func TestHealthCheckIntervalScalesWithCheckedLeaves(t *testing.T) {
	for checks, want := range map[int]string{1: "5s", 1000: "5s", 1001: "6s", 4000: "20s", 10000: "50s"} {
		d := AutoHealthCheckInterval(checks)
		if d.String() != want || float64(checks)/d.Seconds() > HealthCheckBudget {
			t.Errorf("%d checks: every %s, want %s within the budget", checks, d, want)
		}
	}
	for _, tc := range []struct {
		apps, upstreams int
		opt             Options
		checks          int
		interval        string
	}{
		{10, 1, Options{}, 0, ""},
		{10, 2, Options{}, 10, "5s"},
		{501, 3, Options{}, 1002, "6s"},
		{501, 3, Options{HealthCheckInterval: "5s"}, 1002, "5s"},
	} {
		out := mustTraefik(t, fleetDoc(tc.apps, tc.upstreams), tc.opt)
		cfg := decodeStrict(t, out)
		checkInvariants(t, tc.opt, cfg)
		checks, intervals := 0, map[string]bool{}
		for _, s := range cfg.HTTP.Services {
			if lb := s.LoadBalancer; lb != nil && lb.HealthCheck != nil {
				checks++
				intervals[lb.HealthCheck.Interval] = true
			}
		}
		if checks != tc.checks || (checks > 0 && (len(intervals) != 1 || !intervals[tc.interval])) {
			t.Errorf("%d apps × %d upstreams, %+v: %d checks at %v, want %d at %s", tc.apps, tc.upstreams, tc.opt, checks, intervals, tc.checks, tc.interval)
		}
	}
}
