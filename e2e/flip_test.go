package e2e

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"testing"
)

// The flip invariant (DESIGN §4): the app an account was flipped away from must never
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
	// would read it as paulca (README: residuals).
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
	// A literal "#" in a request line is not a fragment to Go's server; it is re-escaped
	// to %23 and refused like the encoded one.
	{"encoded ? and #", "/paulca#x", "400"},

	// Encoded NUL: refused (allowEncodedNullCharacter: false).
	{"null", "/paulca%00/x", "400"},

	// Absolute-form request targets route like origin-form.
	{"absolute form", "http://ti.example.org/paulca/x", "new"},
	{"absolute form", "http://ti.example.org/bob/../paulca", "new"},
	{"absolute form", "http://ti.example.org/bob/x", "legacy"},

	// Spellings that are different names to the oracle (and to Traefik): the legacy app
	// receives them. Each is a residual for a backend that folds names (README).
	{"case", "/PAULCA/x", "legacy"},
	{"case", "/Paulca", "legacy"},
	{"case", "/%50AULCA/x", "legacy"},
	{"trailing dot or space", "/paulca./x", "legacy"},
	{"trailing dot or space", "/paulca%20/x", "legacy"},
	{"control characters", "/paulca%09/x", "legacy"},
	{"non-ASCII", "/paulca%C0%AFx", "legacy"}, // overlong UTF-8 "/"
	{"non-ASCII", "/paulca%E2%80%8B/x", "legacy"},
}

// firstSegment is the text between the leading "/" and the next "/" (after dropping a
// query).
func firstSegment(p string) string {
	p, _, _ = strings.Cut(p, "?")
	p = strings.TrimPrefix(p, "/")
	seg, _, _ := strings.Cut(p, "/")
	return seg
}

// normalise is the oracle's normalisation: percent-decode (once), then resolve dot
// segments and repeated slashes.
func normalise(p string) string {
	p, _, _ = strings.Cut(p, "?")
	if dec, err := url.PathUnescape(p); err == nil {
		p = dec
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return path.Clean(p)
}

// violation reports why a request the legacy app received breaks the oracle ("" if not).
func violation(requestURI, prefix string) string {
	p := requestURI
	if u, err := url.Parse(requestURI); err == nil && u.IsAbs() {
		p = u.RequestURI()
	}
	if firstSegment(p) == prefix {
		return "raw first segment"
	}
	if firstSegment(normalise(p)) == prefix {
		return "normalised first segment"
	}
	return ""
}

// stricter readings some backends apply, reported (not asserted) as residuals.
var stricterReadings = []struct {
	name string
	norm func(string) string
}{
	{"decoded twice", func(p string) string { return normalise(normalise(p)) }},
	{"backslash as slash", func(p string) string { return normalise(strings.ReplaceAll(normalise(p), `\`, "/")) }},
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

// Scenario 5, with both router forms the render emits: one router per prefix (small
// maps) and one grouped PathRegexp router per (host, target) (large maps).
func TestFlipInvariantHoldsForOddSpellings(t *testing.T) {
	for _, form := range []struct {
		name string
		args []string
	}{
		{"per-prefix routers", nil},
		{"grouped PathRegexp router", []string{"--traefik.pathGroupThreshold=1"}},
	} {
		t.Run(form.name, func(t *testing.T) {
			f := startFleet(t, 1, nodeOptions{args: form.args})
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
			tr := startTraefik(t, "traefik", traefikOptions{node: n1})
			tr.waitServedBy(t, host, "/paulca", "tito-go@n1", routeTimeout)
			requireRouterForm(t, tr, host, form.name)

			var table []string
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
				if !strings.Contains("|"+tc.want+"|", "|"+got+"|") {
					t.Errorf("%-22s %-32q → %s, want %s (body %.120q)", tc.class, tc.target, got, tc.want, r.body)
				}
				upstream := ""
				if r.echo != nil {
					upstream = r.echo.RawPath
				}
				table = append(table, fmt.Sprintf("| %s | `%s` | %s | `%s` |", tc.class, tc.target, got, upstream))
			}

			// The oracle, over everything the legacy app ever received.
			seen := legacy.requests()
			control := 0
			residual := map[string][]string{}
			for _, req := range seen {
				if req.RawPath == "/healthz" {
					continue
				}
				control++
				if why := violation(req.RawPath, "paulca"); why != "" {
					t.Errorf("FLIP INVARIANT BROKEN: the legacy app received %q (%s is the flipped prefix)", req.RawPath, why)
				}
				for _, s := range stricterReadings {
					if firstSegment(s.norm(req.RawPath)) == "paulca" {
						residual[s.name] = append(residual[s.name], req.RawPath)
					}
				}
			}
			if control == 0 {
				t.Fatal("the legacy app received nothing: the oracle checked nothing")
			}
			for _, s := range stricterReadings {
				if len(residual[s.name]) > 0 {
					t.Logf("residual: a backend that reads paths %s would take %q as paulca's", s.name, residual[s.name])
				}
			}
			t.Logf("%d spellings sent; the legacy app received %d requests, none of them paulca's by the oracle", len(flipCorpus), control)
			if form.name == "per-prefix routers" {
				lines := []string{
					"Flipped prefix `paulca` on `ti.example.org` (legacy app) → `tito-go`; raw request lines " +
						"through the shipped entry point settings. `legacy` is allowed only when the oracle holds " +
						"for what the legacy app received (it held for every row).",
					"",
					"| class | request-target | answered by | path the upstream received |",
					"|---|---|---|---|",
				}
				lines = append(lines, table...)
				lines = append(lines, "", "Residuals (received by the legacy app, paulca's only under a stricter reading than the oracle's):", "")
				for _, s := range stricterReadings {
					lines = append(lines, fmt.Sprintf("- %s: %q", s.name, residual[s.name]))
				}
				results.add("5. Flip invariant", lines...)
			}
			tr.requireProviderClean(t)
		})
	}
}

// requireRouterForm checks that the render used the router form under test, so the
// grouped run does not silently test per-prefix routers again.
func requireRouterForm(t *testing.T, tr *traefik, host, form string) {
	t.Helper()
	rd, err := tr.rawData()
	if err != nil {
		t.Fatal(err)
	}
	routers, _ := rd.fromProvider()
	grouped, perPrefix := 0, 0
	for _, r := range routers {
		if !strings.Contains(r.Rule, "Host(`"+host+"`)") {
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
		{"/", ""},
	} {
		if got := violation(tc.received, "paulca"); got != tc.want {
			t.Errorf("violation(%q) = %q, want %q", tc.received, got, tc.want)
		}
	}
}
