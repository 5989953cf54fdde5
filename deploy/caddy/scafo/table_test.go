package scafo

import (
	"slices"
	"testing"

	"github.com/scafo/ingress/render/routing"
)

func ups(addrs ...string) []routing.Upstream {
	var out []routing.Upstream
	for i, a := range addrs {
		out = append(out, routing.Upstream{Node: "vps-" + string(rune('a'+i)), Address: a})
	}
	return out
}

// testTable is the document of DESIGN §2 and more, decoded.
func testTable(t testing.TB) *Table {
	t.Helper()
	d := &routing.Document{V: 1, Routes: []routing.Route{
		{Host: "shop.apps.example.com", Application: "shop", Upstreams: ups("10.0.0.1:1", "10.0.0.2:2")},
		{Host: "ti.to", Application: "tito-classic", Upstreams: ups("10.0.0.1:3"),
			Paths: map[string]string{"paulca": "go.tito.io", "bob": "bob.tito.io", "down": "down.tito.io", "bad.x": "go.tito.io"}},
		{Host: "go.tito.io", Application: "tito-go", Upstreams: ups("10.0.0.1:4", "10.0.0.3:5")},
		{Host: "bob.tito.io", Application: "tito-bob", Upstreams: ups("10.0.0.1:6")},
		{Host: "down.tito.io", Application: "tito-down", Upstreams: []routing.Upstream{}},
		{Host: "*.shop.example.org", Application: "shop", Upstreams: ups("10.0.0.1:1", "10.0.0.2:2")},
		{Host: "exact.shop.example.org", Application: "other", Upstreams: ups("10.0.0.9:9")},
		{Host: "closed.apps.example.com", Application: "closed", Upstreams: []routing.Upstream{}},
	}, API: &routing.API{Hosts: []string{"apps.example.com"}, Upstreams: ups("10.0.0.1:7400", "10.0.0.2:7400"),
		Denied: routing.DeniedAPIPrefixes}}
	return NewTable(decoded(t, d))
}

// decoded is d sealed, marshalled and decoded: a document a node could serve.
func decoded(t testing.TB, d *routing.Document) *routing.Document {
	t.Helper()
	d.Seal()
	b, err := routing.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := routing.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// The lookup rules of DESIGN §2 and §14, request by request: exact host first, then the
// one-label wildcard once, never two labels below; the path map's first segment in its
// raw and its normalised spelling (the normalised one wins); a route with nothing ready
// keeps its host (503), no other route takes it; the API apex without its denied paths.
func TestLookupFollowsTheDocumentsRules(t *testing.T) {
	tab := testTable(t)
	type want struct {
		kind   Kind
		host   string
		target string
		dials  []string
	}
	shop := []string{"10.0.0.1:1", "10.0.0.2:2"}
	tito := []string{"10.0.0.1:3"}
	goTito := []string{"10.0.0.1:4", "10.0.0.3:5"}
	bob := []string{"10.0.0.1:6"}
	api := []string{"10.0.0.1:7400", "10.0.0.2:7400"}
	cases := []struct {
		name, host, path string
		want             want
	}{
		{"exact host", "shop.apps.example.com", "/", want{KindRoute, "shop.apps.example.com", "", shop}},
		{"host case folded, port dropped", "SHOP.Apps.Example.COM:8443", "/x", want{KindRoute, "shop.apps.example.com", "", shop}},
		{"one trailing dot is the same name", "shop.apps.example.com.", "/", want{KindRoute, "shop.apps.example.com", "", shop}},
		{"two trailing dots are not", "shop.apps.example.com..", "/", want{}},
		{"unknown host: no route (Caddy answers 404)", "nope.apps.example.com", "/", want{}},
		{"no wildcard under a platform domain", "x.shop.apps.example.com", "/", want{}},
		{"wildcard covers one label", "a.shop.example.org", "/", want{KindRoute, "*.shop.example.org", "", shop}},
		{"exact host before the wildcard", "exact.shop.example.org", "/", want{KindRoute, "exact.shop.example.org", "", []string{"10.0.0.9:9"}}},
		{"two labels below the wildcard: nothing", "a.b.shop.example.org", "/", want{}},
		{"the wildcard's parent: nothing", "shop.example.org", "/", want{}},
		{"a literal * host: nothing", "*.shop.example.org", "/", want{}},
		{"IP literal: nothing", "[::1]:80", "/", want{}},
		{"IPv4 literal: nothing", "127.0.0.1", "/", want{}},
		{"empty host: nothing", "", "/", want{}},
		{"fail closed: a route with nothing ready keeps its host", "closed.apps.example.com", "/", want{KindRoute, "closed.apps.example.com", "", []string{}}},

		{"host without prefix", "ti.to", "/", want{KindRoute, "ti.to", "", tito}},
		{"prefix alone", "ti.to", "/paulca", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"prefix and below", "ti.to", "/paulca/orders", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"segment-exact: a longer segment is not the prefix", "ti.to", "/paulcarson", want{KindRoute, "ti.to", "", tito}},
		{"a prefix with a dot", "ti.to", "/bad.x/y", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"unreserved escape decodes to the prefix", "ti.to", "/%70aulca/x", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"repeated slashes resolve to the prefix", "ti.to", "//paulca/x", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"dot segments resolve to the prefix", "ti.to", "/bob/../paulca/x", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"encoded dot segments resolve to the prefix", "ti.to", "/%2E%2E/paulca", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"encoded slashes: normalised wins over raw", "ti.to", "/bob%2F..%2Fpaulca/x", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"raw first segment hits when the normalised one misses", "ti.to", "/paulca/../other", want{KindRoute, "ti.to", "go.tito.io", goTito}},
		{"raw spelling up to an encoded slash", "ti.to", "/bob%2fx", want{KindRoute, "ti.to", "bob.tito.io", bob}},
		{"a target with nothing ready falls through to the host", "ti.to", "/down/x", want{KindRoute, "ti.to", "", tito}},
		{"prefixes are case-sensitive, like Traefik's Path", "ti.to", "/PAULCA", want{KindRoute, "ti.to", "", tito}},

		{"API apex", "apps.example.com", "/v1/apps/shop", want{KindAPI, "apps.example.com", "", api}},
		{"API apex: /v1/healthz is not /v1/health/", "apps.example.com", "/v1/healthz", want{KindAPI, "apps.example.com", "", api}},
		{"API apex denies storage", "apps.example.com", "/v1/storage/keys/x", want{}},
		{"API apex denies routes", "apps.example.com", "/v1/ingress/routes", want{}},
		{"API apex denies /v1/health itself", "apps.example.com", "/v1/health", want{}},
		{"API apex denies metrics", "apps.example.com", "/metrics", want{}},
		{"API apex denies status", "apps.example.com", "/v1/status", want{}},
		{"API apex denies an escaped spelling", "apps.example.com", "/v1/%69ngress/traefik", want{}},
		{"API apex denies a dot-segment spelling", "apps.example.com", "/x/../v1/storage/keys", want{}},
		{"API apex denies a doubled slash", "apps.example.com", "//v1/status", want{}},
		{"API apex denies an encoded slash", "apps.example.com", "/v1/health%2Finstances/shop", want{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := tab.Lookup(c.host, c.path)
			if got.Kind != c.want.kind || got.Host != c.want.host || got.Target != c.want.target || !slices.Equal(got.Dials, c.want.dials) ||
				(c.want.kind != KindNone && got.Dials == nil) {
				t.Fatalf("Lookup(%q, %q) = %+v, want %+v", c.host, c.path, got, c.want)
			}
		})
	}
}

// The flip invariant, by construction: whatever the spelling, a request whose path's
// first segment is a flipped prefix in its raw or its normalised spelling never goes to
// the host's own (legacy) application.
func TestLookupNeverSendsAFlippedPrefixToTheLegacyApp(t *testing.T) {
	tab := testTable(t)
	spellings := []string{
		"/paulca", "/paulca/", "/paulca/x", "//paulca", "///paulca/x", "/./paulca", "/x/../paulca",
		"/%70aulca", "/%70%61%75%6c%63%61/x", "/%2e/paulca", "/%2E%2E/paulca", "/paulca%2Fx", "/paulca%2fx",
		"/bob%2F..%2Fpaulca/x", "/bob/..%2Fpaulca", "/x/%2e%2e/paulca", "/paulca/..", "/paulca/../x",
	}
	for _, p := range spellings {
		raw, norm := RawFirstSegment(p), NormalisedFirstSegment(p)
		if raw != "paulca" && norm != "paulca" {
			t.Fatalf("spelling %q: neither raw %q nor normalised %q is paulca (a broken test case)", p, raw, norm)
		}
		got := tab.Lookup("ti.to", p)
		if got.Application == "tito-classic" {
			t.Errorf("%q (raw %q, normalised %q) reached the legacy app: %+v", p, raw, norm, got)
		}
	}
}

// On-demand TLS approves exactly the names the document names: route hosts and API
// hosts as written, nothing a wildcard covers, no other spelling.
func TestAllowedIsExact(t *testing.T) {
	tab := testTable(t)
	for _, name := range []string{"shop.apps.example.com", "ti.to", "go.tito.io", "exact.shop.example.org", "apps.example.com",
		"closed.apps.example.com", "down.tito.io"} {
		if !tab.Allowed(name) {
			t.Errorf("Allowed(%q) = false, want true: the document names it", name)
		}
	}
	hostile := []string{
		"", ".", "*", "a.shop.example.org", "*.shop.example.org", "shop.example.org", "x.shop.apps.example.com",
		"SHOP.apps.example.com", "Shop.Apps.Example.Com", "shop.apps.example.com.", "shop.apps.example.com:443",
		" shop.apps.example.com", "shop.apps.example.com ", "shop.apps.example.com\x00", "shop.apps.example.com\n",
		"10.0.0.1", "127.0.0.1", "::1", "[::1]", "[::1]:443", "0x7f.1", "xn--shp-0na.apps.example.com",
		"shop.apps.example.com/", "shop.apps.example.com@evil.example", "APPS.EXAMPLE.COM", "apps.example.com.",
		"ṡhop.apps.example.com", "shop.apps.example.co", "hop.apps.example.com", "sshop.apps.example.com",
	}
	for _, name := range hostile {
		if tab.Allowed(name) {
			t.Errorf("Allowed(%q) = true, want false", name)
		}
	}
	var none *Table
	if none.Allowed("shop.apps.example.com") {
		t.Error("no document yet: a name was approved")
	}
}

func TestRefusedEscapes(t *testing.T) {
	for p, want := range map[string]string{
		"/a%2Fb": "%2F", "/a%2fb": "%2f", "/a%5Cb": "%5C", "/%00": "%00", "/a%3Bb": "%3B", "/%2570aulca": "%25",
		"/a%3Fb": "%3F", "/a%23": "%23", "/%70aulca": "", "/a/b": "", "/%2E%2E/x": "", "/%": "", "/a%2": "",
	} {
		if got := RefusedEscape(p); got != want {
			t.Errorf("RefusedEscape(%q) = %q, want %q", p, got, want)
		}
	}
}
