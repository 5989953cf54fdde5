package scafo

import (
	"net/http"
	"net/http/httptest"
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
	const interval = 200 * time.Millisecond
	asked := make(chan time.Time, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- time.Now():
		default:
		}
		w.Header().Set("X-Scafo-Serial", "7")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	p, _ := newTestPoller(t, PollerConfig{Endpoints: []string{srv.URL}, Interval: interval, StateFile: t.TempDir() + "/routes.json"})
	p.Start()
	t.Cleanup(p.Stop)
	// Six requests: the five gaps between them are the poller's pauses. A poller that
	// spins asks again as soon as the node answers (milliseconds).
	var at []time.Time
	for len(at) < 6 {
		select {
		case a := <-asked:
			at = append(at, a)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d requests in 10 s", len(at))
		}
	}
	if p.Table() == nil {
		t.Fatal("no document applied")
	}
	if took, least := at[5].Sub(at[0]), 5*interval/2; took < least {
		t.Fatalf("6 requests in %s to a node without ETags (Interval %s): the poller spins (want at least %s)", took, interval, least)
	}
}
