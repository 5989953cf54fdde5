package node_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	ptypes "github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node"
	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store/dir"
)

// BenchmarkPoll: what a report costs a poll (the same poll of the rendered
// configuration, 304 to If-None-Match, with and without a plugin's report headers).
// Compare the two as a ratio within one run.
func BenchmarkPoll(b *testing.B) {
	cfg := node.NewConfig()
	cfg.StateDir = b.TempDir()
	cfg.Node.Name = "vps-a"
	cfg.Ingress.Token, cfg.Admin.Token = testIngressToken, testAdminToken
	cfg.Listen = "127.0.0.1:0"
	cfg.Store.Dir.Path = filepath.Join(cfg.StateDir, "store")
	cfg.Reconcile.Interval = ptypes.Duration(40 * time.Millisecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Node.APIPort = node.PortOf(ln.Addr().String())
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	st, err := dir.New(cfg.Store.Dir.Path)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := node.NewWithStore(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), st, testIngressToken, testAdminToken)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	defer func() { cancel(); <-done }()
	// Ready, with this node's own record published (the revision then stays put).
	for s := srv.Pub().Current(); s == nil || s.Upstreams("vps-a") == 0; s = srv.Pub().Current() {
		time.Sleep(10 * time.Millisecond)
	}
	h := srv.Handler()
	first := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/ingress/traefik", nil)
	req.Header.Set("Authorization", "Bearer "+testIngressToken)
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
			req.Header.Set("Authorization", "Bearer "+testIngressToken)
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
