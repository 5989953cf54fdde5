package ingress_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/scafo/ingress/node/api"
)

// BenchmarkPoll: what a report costs a poll (the same poll of the rendered
// configuration, 304 to If-None-Match, with and without a plugin's report headers),
// through the API in process. Compare the two as a ratio within one run.
func BenchmarkPoll(b *testing.B) {
	n := newInProcess(b)
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+ipIngress)
	first := n.Serve(req)
	etag := first.Header().Get("ETag")
	serial := first.Header().Get(api.HeaderSerial)
	rev := first.Header().Get(api.HeaderRevision)
	for _, bc := range []struct {
		name   string
		report bool
	}{{"plain", false}, {"report", true}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/ingress/traefik", nil)
			req.RemoteAddr = "127.0.0.1:40000"
			req.Header.Set("Authorization", "Bearer "+ipIngress)
			req.Header.Set("If-None-Match", etag)
			if bc.report {
				req.Header.Set(api.HeaderIngress, "edge-1")
				req.Header.Set(api.HeaderIngressKind, api.KindPlugin)
				req.Header.Set(api.HeaderAppliedSerial, serial)
				req.Header.Set(api.HeaderAppliedRevision, rev)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				n.H.ServeHTTP(w, req)
				if w.Code != http.StatusNotModified {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
