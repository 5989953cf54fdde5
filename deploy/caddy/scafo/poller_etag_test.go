package scafo

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/render/routing"
)

// A node (or a proxy in front of it) that answers without an ETag cannot be
// long-polled: the poller then asks again after Interval, not in a loop as fast as the
// node answers (each round a decode, a table swap and an fsync'd state file).
func TestPollerDoesNotSpinOnANodeWithoutETags(t *testing.T) {
	d := &routing.Document{V: 1, Routes: []routing.Route{{Host: "shop.example.org", Application: "shop", Upstreams: ups("10.0.0.1:1")}}}
	d.Seal()
	body, err := routing.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("X-Scafo-Serial", "7")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	p, _ := newTestPoller(t, PollerConfig{Endpoints: []string{srv.URL}, Interval: 200 * time.Millisecond, StateFile: t.TempDir() + "/routes.json"})
	p.Start()
	t.Cleanup(p.Stop)
	time.Sleep(time.Second)
	if p.Table() == nil {
		t.Fatal("no document applied")
	}
	if got := n.Load(); got > 10 {
		t.Fatalf("%d requests in 1 s to a node without ETags (Interval 200 ms): the poller spins", got)
	}
}
