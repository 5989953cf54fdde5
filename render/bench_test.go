package render

import (
	"fmt"
	"testing"

	"github.com/scafo/ingress/render/fleet"
	"github.com/scafo/ingress/render/routing"
)

// generatedDoc derives fleet.GenerateState: about 1.12 routes per application, 10k
// prefixes on ti.to spread round-robin over nApps/100 target hosts.
func generatedDoc(tb testing.TB, nApps, nPrefixes int) *routing.Document {
	tb.Helper()
	doc, _ := fleet.Derive(fleet.GenerateState(nApps, nPrefixes), fleet.GenerateOptions())
	if doc == nil || len(doc.Routes) == 0 {
		tb.Fatal("fleet.Derive produced no routes")
	}
	return doc
}

// BenchmarkRender renders derived fleets of 1k and 10k applications with 10k prefixes
// on one host: as shipped (targets above the threshold grouped into one PathRegexp
// router each), with every prefix its own router (the dashboard-friendly worst case),
// and derive+prefer+render end to end (what a node does on a cache miss).
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		doc := generatedDoc(b, n, 10000)
		name := fmt.Sprintf("routes=%d/prefixes=10000", len(doc.Routes))
		b.Run(name+"/grouped", func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				out, err := Traefik(doc, Options{})
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
			}
			b.ReportMetric(float64(size), "bytes/render")
		})
		b.Run(name+"/per-prefix", func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				out, err := Traefik(doc, Options{PathGroupThreshold: routing.MaxPaths})
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
			}
			b.ReportMetric(float64(size), "bytes/render")
		})
		st := fleet.GenerateState(n, 10000)
		b.Run(name+"/derive+prefer+render", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, _ := fleet.Derive(st, fleet.GenerateOptions())
				d, err := routing.Prefer(d, "vps-b")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Traefik(d, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRenderOfAGeneratedFleetIsValid runs the whole-render checks on a derived fleet
// rather than hand-written documents.
func TestRenderOfAGeneratedFleetIsValid(t *testing.T) {
	doc := generatedDoc(t, 300, 2000)
	for _, opt := range []Options{{}, {PathGroupThreshold: routing.MaxPaths},
		{CertResolver: "le", PlatformWildcardCerts: true, PlatformDomains: []string{"apps.example.com"}}} {
		out, err := Traefik(doc, opt)
		if err != nil {
			t.Fatal(err)
		}
		cfg := decodeStrict(t, out)
		checkInvariants(t, opt, cfg)
		compileRouters(t, cfg) // every rule parses
		if s := loadTraefikSchemaOrNil(t); s != nil {
			for _, v := range s.validate(out) {
				t.Error(v)
			}
		}
	}
}
