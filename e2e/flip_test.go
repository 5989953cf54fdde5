package e2e

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"testing"
)

// The flip invariant (docs/design.md §4): the app an account was flipped away from must never
// answer for that account, whatever spelling a client sends. The oracle: the legacy app
// never receives a path whose first segment is a flipped prefix, raw or normalised
// (percent-decoded, then dot segments and repeated slashes resolved).

// flipCase is one request-target of the corpus and what the shipped configuration does
// with it. want: "new" (the flipped-to app), "legacy" (the host's own app: allowed only
// when the oracle holds), "400" (refused by the entry point), or "new|legacy" where
// either is safe and the choice is the render's.
type flipCase struct {
	class  string
	target string
	want   string
}

// flipCorpus: the flipped prefix is "paulca"; "bob" is an account that was not flipped.
var flipCorpus = []flipCase{
	// Canonical spellings and boundaries.
	{"canonical", "/paulca", "new"},
	{"canonical", "/paulca/", "new"},
	{"canonical", "/paulca/x", "new"},
	{"canonical", "/paulca?x=1", "new"},
	{"canonical", "/paulca/x?next=/bob", "new"},
	{"canonical", "/bob/x", "legacy"},
	{"canonical", "/paulcax", "legacy"},
	{"canonical", "/bob/paulca", "legacy"},
	{"canonical", "/?paulca", "legacy"},

	// Repeated slashes: sanitizePath collapses them before routing.
	{"repeated slashes", "//paulca", "new"},
	{"repeated slashes", "//paulca/x", "new"},
	{"repeated slashes", "///paulca//x", "new"},
	{"repeated slashes", "/bob//../paulca/x", "new"},

	// Dot segments: sanitizePath resolves them before routing.
	{"dot segments", "/./paulca/x", "new"},
	{"dot segments", "/bob/../paulca/x", "new"},
	{"dot segments", "/../paulca/x", "new"},
	{"dot segments", "/bob/./../paulca", "new"},
	{"dot segments", "/paulca/../bob/x", "legacy"}, // resolves to bob: not paulca's
	{"dot segments", "/paulca/..", "legacy"},       // resolves to /

	// Percent-encoded unreserved characters: decoded at the entry point (normalizePath),
	// any case of hex digits.
	{"encoded letters", "/%70aulca/x", "new"},
	{"encoded letters", "/pa%75lca", "new"},
	{"encoded letters", "/%70%61%75%6c%63%61/x", "new"},
	{"encoded letters", "/%70%61%75%6C%63%61/x", "new"},
	{"encoded letters", "/%62ob/x", "legacy"},

	// Encoded dots: decoded, then resolved as dot segments.
	{"encoded dots", "/bob/%2e%2e/paulca/x", "new"},
	{"encoded dots", "/bob/.%2E/paulca/x", "new"},
	{"encoded dots", "/%2e/paulca/x", "new"},
	{"encoded dots", "/%2E%2E/paulca", "new"},

	// Encoded slashes, before, inside and after the segment, any case: refused
	// (allowEncodedSlash: false). Without the refusal, /bob%2F..%2Fpaulca/x would route
	// on its raw first segment "bob%2F..%2Fpaulca" to the legacy app, which a decoding
	// backend resolves into paulca's subtree.
	{"encoded slash", "/paulca%2Fx", "400"},
	{"encoded slash", "/paulca%2fx", "400"},
	{"encoded slash", "/%2Fpaulca/x", "400"},
	{"encoded slash", "/%2fpaulca", "400"},
	{"encoded slash", "/bob%2F..%2Fpaulca/x", "400"},
	{"encoded slash", "/bob/..%2Fpaulca/x", "400"},
	{"encoded slash", "/bob%2f%2e%2e%2fpaulca/x", "400"},
	{"encoded slash", "/paulca%2F..%2Fbob/x", "400"},
	{"encoded slash", "/x/y%2F..%2F..%2F..%2Fpaulca", "400"},

	// Backslashes: some backends treat "\" as "/". Encoded ones are refused
	// (allowEncodedBackSlash: false); a literal one is re-escaped by Go to %5C, which the
	// same refusal then catches.
	{"backslash", "/bob%5C..%5Cpaulca/x", "400"},
	{"backslash", "/paulca%5cx", "400"},
	{"backslash", `/bob\..\paulca/x`, "400"},
	{"backslash", `/\paulca/x`, "400"},

	// Semicolons. Encoded: refused (allowEncodedSemicolon: false). Literal: legal path
	// parameters; Traefik routes "/paulca;x" on the segment "paulca;x", so the legacy app
	// receives it. That satisfies the oracle; a servlet container that strips ";params"
	// would read it as paulca (deploy/traefik/README.md: residuals).
	{"semicolon", "/paulca%3Bx/y", "400"},
	{"semicolon", "/paulca%3b/y", "400"},
	{"semicolon", "/paulca;x/y", "new|legacy"},
	{"semicolon", "/paulca;/y", "new|legacy"},
	{"semicolon", "/bob;/../paulca/x", "new"},

	// Encoded percent: refused (allowEncodedPercent: false); a double-decoding backend
	// would turn %2570 into p.
	{"encoded percent", "/%2570aulca/x", "400"},
	{"encoded percent", "/bob%252F..%252Fpaulca/x", "400"},

	// Encoded ? and # would cut the path short in a backend that re-parses it: refused.
	{"encoded ? and #", "/paulca%3F/x", "400"},
	{"encoded ? and #", "/paulca%3fx", "400"},
	{"encoded ? and #", "/paulca%23/x", "400"},
	// A literal "#" in a request line is not a fragment to Go's server: it stays in the
	// raw path, where Traefik's denyFragment (always on) refuses it.
	{"encoded ? and #", "/paulca#x", "400"},

	// Encoded NUL: refused (allowEncodedNullCharacter: false).
	{"null", "/paulca%00/x", "400"},

	// Absolute-form request targets route like origin-form.
	{"absolute form", "http://ti.example.org/paulca/x", "new"},
	{"absolute form", "http://ti.example.org/bob/../paulca", "new"},
	{"absolute form", "http://ti.example.org/bob/x", "legacy"},

	// Spellings that are different names to the oracle (and to Traefik): the legacy app
	// receives them. Each is a residual for a backend that folds names (deploy/traefik/README.md).
	{"case", "/PAULCA/x", "legacy"},
	{"case", "/Paulca", "legacy"},
	{"case", "/%50AULCA/x", "legacy"},
	{"trailing dot or space", "/paulca./x", "legacy"},
	{"trailing dot or space", "/paulca%20/x", "legacy"},
	{"control characters", "/paulca%09/x", "legacy"},
	{"non-ASCII", "/paulca%C0%AFx", "legacy"}, // overlong UTF-8 "/"
	{"non-ASCII", "/paulca%E2%80%8B/x", "legacy"},
}

// pathOf is the path part of a request-target as received: origin-form or
// absolute-form, query dropped, escapes kept.
func pathOf(requestURI string) string {
	if u, err := url.Parse(requestURI); err == nil && u.IsAbs() {
		requestURI = u.RequestURI()
	}
	p, _, _ := strings.Cut(requestURI, "?")
	return p
}

// firstSegment is the text between the leading "/" and the next "/".
func firstSegment(p string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return seg
}

// normalise is the oracle's normalisation of a path (no query): percent-decode once,
// then resolve dot segments and repeated slashes. A decoded "?" or "#" is data.
func normalise(p string) string { return resolve(decode(p)) }

// decode percent-decodes p once (an invalid escape leaves p as it is).
func decode(p string) string {
	if dec, err := url.PathUnescape(p); err == nil {
		return dec
	}
	return p
}

// resolve resolves dot segments and repeated slashes.
func resolve(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p)
}

// violation reports why a request the legacy app received breaks the oracle ("" if not).
func violation(requestURI, prefix string) string {
	p := pathOf(requestURI)
	if firstSegment(p) == prefix {
		return "raw first segment"
	}
	if firstSegment(normalise(p)) == prefix {
		return "normalised first segment"
	}
	return ""
}

// stricterReadings are what some backends do beyond the oracle; what they would
// misread is reported (not asserted) as residuals.
var stricterReadings = []struct {
	name string
	norm func(string) string // path (no query) → the path such a backend routes on
}{
	{"decoded twice", func(p string) string { return normalise(normalise(p)) }},
	{"re-split at a decoded ? or #", func(p string) string {
		n := normalise(p)
		if i := strings.IndexAny(n, "?#"); i >= 0 {
			n = n[:i]
		}
		return n
	}},
	{"backslash as slash", func(p string) string { return resolve(strings.ReplaceAll(decode(p), `\`, "/")) }},
	{"path parameters stripped", func(p string) string {
		segs := strings.Split(normalise(p), "/")
		for i, s := range segs {
			segs[i], _, _ = strings.Cut(s, ";")
		}
		return strings.Join(segs, "/")
	}},
	{"case folded", func(p string) string { return strings.ToLower(normalise(p)) }},
	{"trailing dots and spaces trimmed", func(p string) string {
		segs := strings.Split(normalise(p), "/")
		for i, s := range segs {
			segs[i] = strings.TrimRight(s, ". ")
		}
		return strings.Join(segs, "/")
	}},
}

// corpusRun is what one Traefik did with the corpus.
type corpusRun struct {
	outcome  map[string]string   // target → "new", "legacy" or the status code
	received map[string]string   // target → the path the upstream received
	residual map[string][]string // stricter reading → paths the legacy app received
}

// sendCorpus sends every spelling as a raw request line and applies the oracle to
// everything the legacy app received. exact: also require each case's documented
// outcome.
func sendCorpus(t *testing.T, tr *traefik, legacy *echo, host string, exact bool) corpusRun {
	t.Helper()
	run := corpusRun{outcome: map[string]string{}, received: map[string]string{}, residual: map[string][]string{}}
	for _, tc := range flipCorpus {
		r, err := tr.raw(host, tc.target)
		if err != nil {
			t.Errorf("%s: %v", tc.target, err)
			continue
		}
		got := fmt.Sprint(r.status)
		switch {
		case r.echo != nil && r.echo.Name == "tito-go@n1":
			got = "new"
		case r.echo != nil && r.echo.Name == "legacy@n1":
			got = "legacy"
		}
		run.outcome[tc.target] = got
		if r.echo != nil {
			run.received[tc.target] = r.echo.RawPath
		}
		if exact && !strings.Contains("|"+tc.want+"|", "|"+got+"|") {
			t.Errorf("%-22s %-32q → %s, want %s (body %.120q)", tc.class, tc.target, got, tc.want, r.body)
		}
	}

	// The oracle, over everything the legacy app ever received.
	received := 0
	for _, req := range legacy.requests() {
		if req.RawPath == "/healthz" {
			continue
		}
		received++
		if why := violation(req.RawPath, "paulca"); why != "" {
			t.Errorf("FLIP INVARIANT BROKEN: the legacy app received %q (%s is the flipped prefix)", req.RawPath, why)
		}
		for _, s := range stricterReadings {
			if firstSegment(s.norm(pathOf(req.RawPath))) == "paulca" {
				run.residual[s.name] = append(run.residual[s.name], req.RawPath)
			}
		}
	}
	if received == 0 {
		t.Fatal("the legacy app received nothing: the oracle checked nothing")
	}
	for _, s := range stricterReadings {
		if len(run.residual[s.name]) > 0 {
			t.Logf("residual: a backend whose reading is %q would take %q as paulca's", s.name, run.residual[s.name])
		}
	}
	t.Logf("%d spellings sent; the legacy app received %d requests, none of them paulca's by the oracle", len(flipCorpus), received)
	return run
}

// Scenario 5: the corpus through the shipped settings with both router forms the render
// emits (one router per prefix for small maps, one grouped PathRegexp router per (host,
// target) for large ones), and once more with Traefik's default encodedCharacters to
// show what the render holds on its own (the oracle only; outcomes differ by design).
func TestFlipInvariantHoldsForOddSpellings(t *testing.T) {
	runs := map[string]corpusRun{}
	for _, mode := range []struct {
		name      string
		nodeArgs  []string
		defaults  bool // Traefik's default encodedCharacters (counterfactual)
		routerSet string
	}{
		{"shipped settings, per-prefix routers", nil, false, "per-prefix routers"},
		{"shipped settings, grouped PathRegexp router", []string{"--traefik.pathGroupThreshold=1"}, false, "grouped PathRegexp router"},
		{"Traefik's default encodedCharacters, render alone", nil, true, "per-prefix routers"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := startFleet(t, 1, nodeOptions{args: mode.nodeArgs})
			n1 := f.nodes[0]
			legacy := f.deploy(t, "legacy", "tito", []*node{n1}, "/healthz").on(n1)
			f.deploy(t, "tito-go", "tito", []*node{n1}, "/healthz")
			const host = "ti.example.org"
			n1.claim(t, "legacy", host)
			// Two prefixes, so the grouped form (threshold 1) really groups.
			n1.putPaths(t, "legacy", host, map[string]string{
				"paulca":  "tito-go.apps.localhost",
				"bigcorp": "tito-go.apps.localhost",
			})
			tr := startTraefik(t, "traefik", traefikOptions{node: n1, traefikDefaultEncodedCharacters: mode.defaults})
			tr.waitServedBy(t, host, "/paulca", "tito-go@n1", routeTimeout)
			tr.waitServedBy(t, host, "/bob", "legacy@n1", routeTimeout)
			requireRouterForm(t, tr, host, mode.routerSet)
			runs[mode.name] = sendCorpus(t, tr, legacy, host, !mode.defaults)
			tr.requireProviderClean(t, "http")
		})
	}

	shipped, alone := runs["shipped settings, per-prefix routers"], runs["Traefik's default encodedCharacters, render alone"]
	if shipped.outcome == nil || alone.outcome == nil {
		return
	}
	lines := []string{
		"Flipped prefix `paulca` on `ti.example.org` (legacy app) → `tito-go` (new); raw request lines. " +
			"`legacy` is allowed only where the oracle holds for what the legacy app received; it held for " +
			"every row in every run (shipped settings with per-prefix and with grouped routers, and " +
			"Traefik's default `encodedCharacters` with the render alone).",
		"",
		"| class | request-target | shipped settings | Traefik defaults, render alone | path the upstream received (shipped) |",
		"|---|---|---|---|---|",
	}
	for _, tc := range flipCorpus {
		lines = append(lines, fmt.Sprintf("| %s | `%s` | %s | %s | `%s` |", tc.class, strings.ReplaceAll(tc.target, "|", `\|`),
			shipped.outcome[tc.target], alone.outcome[tc.target], shipped.received[tc.target]))
	}
	lines = append(lines, "", "Residuals: paths the legacy app received that only a stricter reading than the oracle's takes as paulca's.", "",
		"| reading | shipped settings | Traefik defaults, render alone |", "|---|---|---|")
	for _, s := range stricterReadings {
		lines = append(lines, fmt.Sprintf("| %s | %q | %q |", s.name, shipped.residual[s.name], alone.residual[s.name]))
	}
	results.add("Scenario 5: flip invariant", lines...)
}

// requireRouterForm checks that the render used the router form under test, so the
// grouped run does not silently test per-prefix routers again.
func requireRouterForm(t *testing.T, tr *traefik, host, form string) {
	t.Helper()
	rd, err := tr.rawData()
	if err != nil {
		t.Fatal(err)
	}
	routers, _ := rd.fromProvider("http")
	grouped, perPrefix := 0, 0
	for _, r := range routers {
		// The host's path guard (service "deny") is not a prefix router.
		if !strings.Contains(r.Rule, "Host(`"+host+"`)") || r.Service == "deny" || strings.HasPrefix(r.Service, "deny@") {
			continue
		}
		switch {
		case strings.Contains(r.Rule, "PathRegexp("):
			grouped++
		case strings.Contains(r.Rule, "PathPrefix("):
			perPrefix++
		}
	}
	want := map[string][2]int{"per-prefix routers": {0, 2}, "grouped PathRegexp router": {1, 0}}[form]
	if grouped != want[0] || perPrefix != want[1] {
		t.Fatalf("%s: %d grouped and %d per-prefix routers on %s, want %d and %d", form, grouped, perPrefix, host, want[0], want[1])
	}
}

// The oracle itself must catch what it is for; a vacuous oracle would pass anything.
func TestFlipOracleCatchesFlippedSpellings(t *testing.T) {
	for _, tc := range []struct {
		received string
		want     string
	}{
		{"/paulca", "raw first segment"},
		{"/paulca/x?y", "raw first segment"},
		{"/paulca%2Fx", "normalised first segment"},
		{"/bob%2F..%2Fpaulca/x", "normalised first segment"},
		{"//paulca/x", "normalised first segment"},
		{"/%70aulca", "normalised first segment"},
		{"/bob/../paulca", "normalised first segment"},
		{"http://ti.example.org/paulca/x", "raw first segment"},
		{"/bob/x", ""},
		{"/paulcax", ""},
		{"/PAULCA", ""},
		{"/paulca;x", ""},
		{"/%2570aulca", ""},
		{"/paulca%3Fx", ""}, // a decoded "?" is data to the oracle
		{"/paulca%3F/x?y", ""},
		{`/bob\..\paulca/x`, ""}, // a backslash is not a separator to the oracle
		{"/?paulca", ""},
		{"/", ""},
	} {
		if got := violation(tc.received, "paulca"); got != tc.want {
			t.Errorf("violation(%q) = %q, want %q", tc.received, got, tc.want)
		}
	}
}

func TestStricterReadingsFindWhatTheyAreFor(t *testing.T) {
	for _, tc := range []struct {
		reading, path string
	}{
		{"decoded twice", "/%2570aulca/x"},
		{"re-split at a decoded ? or #", "/paulca%3Fx"},
		{"re-split at a decoded ? or #", "/paulca%23"},
		{"backslash as slash", `/bob\..\paulca/x`},
		{"backslash as slash", "/bob%5C..%5Cpaulca/x"},
		{"path parameters stripped", "/paulca;x/y"},
		{"case folded", "/PAULCA"},
		{"trailing dots and spaces trimmed", "/paulca./x"},
	} {
		if violation(tc.path, "paulca") != "" {
			t.Errorf("%q breaks the oracle itself; it cannot test a stricter reading", tc.path)
		}
		found := false
		for _, s := range stricterReadings {
			if s.name == tc.reading {
				found = true
				if firstSegment(s.norm(tc.path)) != "paulca" {
					t.Errorf("reading %q does not take %q as paulca's", s.name, tc.path)
				}
			}
		}
		if !found {
			t.Errorf("no reading named %q", tc.reading)
		}
	}
}
