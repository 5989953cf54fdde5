package routing

import (
	"bytes"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// Independent oracles: what the validators must accept, written as regular expressions
// rather than the hand-rolled scanners they check.
var (
	hostOracle   = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)
	tldAllDigits = regexp.MustCompile(`\.[0-9]+$`)
	prefixOracle = regexp.MustCompile(`^[a-z0-9][a-z0-9._~-]{0,62}$`)
)

func hostOracleAccepts(s string) bool {
	return len(s) <= MaxHostLen && hostOracle.MatchString(s) && !tldAllDigits.MatchString(s)
}

// FuzzValidateHost: no panics; ValidateHost agrees with the oracle; an accepted host
// is already folded and round-trips through a document unchanged; a rejected one
// names the field.
func FuzzValidateHost(f *testing.F) {
	for _, s := range []string{"shop.apps.example.com", "ti.to", "Foo.com", "10.83.0.1", "[::1]:80",
		"example.com.", "*.a.example", "a..b", "-a.b", "xn--bcher-kva.example", "bücher.example",
		"1.2.3", "a.b1", strings.Repeat("a.", 127) + "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateHost("host", s)
		if want := hostOracleAccepts(s); (err == nil) != want {
			t.Fatalf("ValidateHost(%q) = %v, oracle accepts: %v", s, err, want)
		}
		if err != nil {
			if fe, ok := err.(*FieldError); !ok || fe.Field != "host" || fe.Value != s || fe.Rule == "" {
				t.Fatalf("ValidateHost(%q) = %#v, want a *FieldError on host", s, err)
			}
			return
		}
		if FoldHost(s) != s {
			t.Fatalf("accepted %q is not folded", s)
		}
		if err := ValidateCustomHost("host", s); err != nil {
			t.Fatalf("ValidateCustomHost refuses host %q: %v", s, err)
		}
		if len(s) <= MaxHostLen-2 {
			if err := ValidateCustomHost("host", "*."+s); err != nil {
				t.Fatalf("ValidateCustomHost refuses *.%s: %v", s, err)
			}
		}
		d := &Document{V: 1, Routes: []Route{{Host: s, Application: "a",
			Upstreams: []Upstream{{Node: "n", Address: "10.0.0.1:80"}}, Paths: map[string]string{"p": s}}}}
		d.Seal()
		roundTrip(t, d)
		// An apex an application holds is never in api.hosts: the API host gets a
		// document of its own.
		d = &Document{V: 1, Routes: []Route{},
			API: &API{Hosts: []string{s}, Upstreams: []Upstream{}, Denied: []string{"/v1/storage"}}}
		d.Seal()
		roundTrip(t, d)
	})
}

// FuzzValidatePrefix: no panics; ValidatePrefix agrees with the oracle; an accepted
// prefix round-trips through a document unchanged.
func FuzzValidatePrefix(f *testing.F) {
	for _, s := range []string{"paulca", "bigcorp", ".", "..", "/paulca", "Paulca", "a.b_c~d-e",
		"paul%2Fca", strings.Repeat("p", 63), strings.Repeat("p", 64), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidatePrefix("prefix", s)
		if want := prefixOracle.MatchString(s); (err == nil) != want {
			t.Fatalf("ValidatePrefix(%q) = %v, oracle accepts: %v", s, err, want)
		}
		if err != nil {
			if fe, ok := err.(*FieldError); !ok || fe.Field != "prefix" || fe.Value != s {
				t.Fatalf("ValidatePrefix(%q) = %#v, want a *FieldError on prefix", s, err)
			}
			return
		}
		d := &Document{V: 1, Routes: []Route{{Host: "a.example", Application: "a",
			Upstreams: []Upstream{{Node: "n", Address: "10.0.0.1:80"}}, Paths: map[string]string{s: "a.example"}}}}
		d.Seal()
		roundTrip(t, d)
	})
}

// FuzzDecode: no panics; whatever Decode accepts marshals to bytes that decode to an
// equal document and marshal to the same bytes again.
func FuzzDecode(f *testing.F) {
	sample := mustMarshal(f, sampleDocument())
	f.Add(sample)
	f.Add([]byte(`{"v":1,"routes":[]}`))
	f.Add([]byte(`{"v":1,"routes":null,"api":null}`))
	f.Add([]byte(`{"v":2,"routes":[]}`))
	f.Add([]byte(`{"v":1,"revision":"\u2028<&>","routes":[{"host":"*.a.example","application":"a","upstreams":null,"paths":{},"healthPath":"/a&b"}]}`))
	f.Add([]byte(`{"V":1,"ROUTES":[{"HOST":"b.example","application":"b","upstreams":[{"node":"n","address":"[fd00::1]:80","apiPort":1}]},{"host":"a.example","application":"a","upstreams":[],"paths":{"x":"b.example"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			return
		}
		roundTrip(t, d)
	})
}

// roundTrip checks Marshal → Decode → Marshal gives back d and the same bytes, and
// that the revision survives.
func roundTrip(t *testing.T, d *Document) {
	t.Helper()
	b1, err := Marshal(d)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	d2, err := Decode(b1)
	if err != nil {
		t.Fatalf("Decode(Marshal(d)) failed: %v\n%s", err, b1)
	}
	if !reflect.DeepEqual(canonical(d), d2) {
		t.Fatalf("round trip changed the document:\n%+v\n%+v", d, d2)
	}
	b2, err := Marshal(d2)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("bytes moved on round trip:\n%s\n%s", b1, b2)
	}
	if ComputeRevision(d) != ComputeRevision(d2) {
		t.Fatal("revision moved on round trip")
	}
}
