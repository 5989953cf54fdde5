package reconcile_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/scafo/ingress/node/publish"
	"github.com/scafo/ingress/node/reconcile"
	"github.com/scafo/ingress/node/self"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render"
	"github.com/scafo/ingress/render/fleet"
)

// clockedStore is a store whose listings date each object by the virtual clock at its
// last write (a real store dates them by its own clock).
type clockedStore struct {
	store.Store
	now   time.Time
	dated map[string]time.Time
}

func (s *clockedStore) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	etag, err := s.Store.Put(ctx, key, v, c)
	if err == nil {
		s.dated[key] = s.now
	}
	return etag, err
}

func (s *clockedStore) List(ctx context.Context, prefix string) ([]store.Entry, error) {
	es, err := s.Store.List(ctx, prefix)
	for i := range es {
		es[i].ModTime = s.dated[es[i].Key]
	}
	return es, err
}

// TestHeartbeatsBumpNothingAndKeepPeersLive: heartbeats (self.Record.Heartbeat) bump no
// serial, yet a heartbeating peer never goes stale for a node that sees nothing else
// of it: its liveness comes from the modification times of one LIST of nodes/ per
// heartbeat interval. Once its heartbeats stop, it goes stale within the TTL plus a
// heartbeat interval. Stepped on a virtual clock, a pass every 20 ms.
func TestHeartbeatsBumpNothingAndKeepPeersLive(t *testing.T) {
	const (
		heartbeat = 100 * time.Millisecond
		ttl       = 600 * time.Millisecond
		tick      = 20 * time.Millisecond
	)
	ctx := t.Context()
	d := openDir(t, t.TempDir())
	st := &clockedStore{Store: d, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), dated: map[string]time.Time{}}
	peer := self.New(self.Options{Store: st, Identity: &store.Identity{}, Log: slog.New(slog.DiscardHandler), Name: "vps-b",
		Address: "10.0.0.2", APIPort: 7400, NodeTTL: ttl,
		Settings:  func() fleet.NodeSettings { return fleet.NodeSettings{} },
		Instances: func() map[string]fleet.Instance { return nil }, OnAnnounced: func() {}})
	id := &store.Identity{}
	r := reconcile.New(reconcile.Options{Store: st, Publisher: publish.New(render.Options{}, "", id.Mark),
		Log: slog.New(slog.DiscardHandler), Identity: id, FleetOptions: fleet.GenerateOptions, Heartbeat: heartbeat})
	ticks := 0
	step := func(beat bool) { // a pass every tick, a heartbeat of vps-b every heartbeat interval
		if beat && ticks%int(heartbeat/tick) == 0 {
			peer.Heartbeat(ctx, st.now)
		}
		if err := r.Pass(ctx, st.now, false); err != nil {
			t.Fatal(err)
		}
		ticks++
		st.now = st.now.Add(tick)
	}
	seenAgo := func() time.Duration {
		for _, rec := range r.Status().Nodes {
			if rec.Name == "vps-b" {
				return st.now.Sub(rec.Seen)
			}
		}
		t.Fatal("vps-b not in the status")
		return 0
	}
	step(true)
	serial, _, err := store.ReadSerial(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 * int(ttl/tick) { // four TTLs of heartbeats
		step(true)
		if ago := seenAgo(); ago > ttl {
			t.Fatalf("heartbeating vps-b last seen %s ago, beyond the TTL %s: stale", ago, ttl)
		}
	}
	if now, _, _ := store.ReadSerial(ctx, d); now != serial {
		t.Errorf("the serial moved from %d to %d over %s of heartbeats alone", serial, now, 4*ttl)
	}
	stopped := st.now
	for seenAgo() <= ttl { // vps-b stopped
		if took := st.now.Sub(stopped); took > ttl+heartbeat {
			t.Fatalf("vps-b not stale %s after it stopped, want within TTL %s + heartbeat %s", took, ttl, heartbeat)
		}
		step(false)
	}
}
