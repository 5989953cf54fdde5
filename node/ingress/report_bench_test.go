package ingress_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/scafo/ingress/internal/testnode"
	"github.com/scafo/ingress/node/api"
)

// BenchmarkPoll: what a report costs a poll (the same poll of the rendered
// configuration, 304 to If-None-Match, with and without a plugin's report headers).
// Compare the two as a ratio within one run.
func BenchmarkPoll(b *testing.B) {
	n := testnode.Start(b, testnode.Config(b, "vps-a", b.TempDir()))
	// Ready, with this node's own record published (the revision then stays put).
	n.WaitReady()
	h := n.Srv.Handler()
	first := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
	h.ServeHTTP(first, req)
	etag := first.Header().Get("ETag")
	serial := first.Header().Get("X-Scafo-Serial")
	rev := first.Header().Get("X-Scafo-Revision")
	for _, bc := range []struct {
		name   string
		report bool
	}{{"plain", false}, {"report", true}} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v1/ingress/traefik", nil)
			req.Header.Set("Authorization", "Bearer "+testnode.IngressToken)
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
				h.ServeHTTP(w, req)
				if w.Code != http.StatusNotModified {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
