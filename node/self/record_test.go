package self

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// refusingStore refuses every write while refuse is set: a store that takes reads and
// not writes (a full disk, a revoked permission).
type refusingStore struct {
	store.Store
	refuse atomic.Bool
}

func (s *refusingStore) Put(ctx context.Context, key string, v []byte, c store.Condition) (string, error) {
	if s.refuse.Load() {
		return "", fmt.Errorf("put %s: %w: disk full", key, store.ErrUnavailable)
	}
	return s.Store.Put(ctx, key, v, c)
}

// TestAFailingHeartbeatSaysSinceWhen: while the record's writes fail, Err says why and
// FailingSince when the first of them failed (not the latest: a status page reads it as
// "unreachable since"); a success clears both.
func TestAFailingHeartbeatSaysSinceWhen(t *testing.T) {
	st := &refusingStore{Store: dirStore(t)}
	r := New(options(st, "vps-a", "10.83.0.1", "n1"))
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.Write(ctx)
	if e, since := r.Err(), r.FailingSince(); e != nil || !since.IsZero() {
		t.Fatalf("after a good write: Err %v, FailingSince %v; want neither", e, since)
	}
	st.refuse.Store(true)
	before := time.Now()
	r.Write(ctx)
	first := r.FailingSince()
	if e := r.Err(); e == nil || first.Before(before) || first.After(time.Now()) {
		t.Fatalf("after a failed write: Err %v, FailingSince %v (failed at %v)", e, first, before)
	}
	r.Write(ctx)
	if again := r.FailingSince(); !again.Equal(first) || r.Err() == nil {
		t.Fatalf("a second failure moved FailingSince from %v to %v", first, again)
	}
	st.refuse.Store(false)
	r.Write(ctx)
	if e, since := r.Err(), r.FailingSince(); e != nil || !since.IsZero() {
		t.Fatalf("after writes succeed again: Err %v, FailingSince %v; want neither", e, since)
	}
}

// TestTheLastRecordsPortsAreToldBeforeItIsOverwritten: a node (a new state dir: a new
// node id) reads its last record before its first write of it and tells LastRecord the
// ports it publishes, once; while LastRecord fails, the record is not overwritten (it
// is the only account of those ports), and the next heartbeat tries again. Without
// this, fleetsim -statelost seed 3: a port peers still routed to went to another
// tenant.
func TestTheLastRecordsPortsAreToldBeforeItIsOverwritten(t *testing.T) {
	d := dirStore(t)
	ctx := context.Background()
	last := fleet.NodeRecord{Name: "vps-c", Address: "10.0.0.3", APIPort: 7400, Seen: time.Now().Add(-time.Hour).UTC(),
		Instances: map[string]fleet.Instance{"app1": {Port: 24000, Ready: true, AppID: "id1"}},
		Boot:      &fleet.Boot{Node: "the-lost-state-dir", ID: "b0"}}
	b, _ := json.Marshal(last)
	if _, err := d.Put(ctx, fleet.NodeKey("vps-c"), b, store.Condition{IfNoneMatch: true}); err != nil {
		t.Fatal(err)
	}
	var told []map[string]fleet.Instance
	failing := true
	o := options(d, "vps-c", "10.0.0.3", "a-new-state-dir")
	o.Instances = func() map[string]fleet.Instance { return map[string]fleet.Instance{} }
	o.LastRecord = func(insts map[string]fleet.Instance) error {
		told = append(told, insts)
		if failing {
			return errors.New("disk full")
		}
		return nil
	}
	r := New(o)
	r.Heartbeat(ctx, time.Now())
	if len(told) != 1 || told[0]["app1"].Port != 24000 {
		t.Fatalf("LastRecord told %v, want once, app1 on 24000", told)
	}
	if got := readRecord(t, d, "vps-c"); got.Boot.Node != "the-lost-state-dir" {
		t.Fatalf("the record was overwritten (boot %v) while its ports were not held", got.Boot)
	}
	failing = false
	r.Heartbeat(ctx, time.Now())
	r.Heartbeat(ctx, time.Now())
	if len(told) != 2 || told[1]["app1"].Port != 24000 {
		t.Fatalf("LastRecord told %v, want a second time (the first failed), then never", told)
	}
	if got := readRecord(t, d, "vps-c"); got.Boot.Node != "a-new-state-dir" || len(got.Instances) != 0 {
		t.Fatalf("after the ports were held: record of boot %v with %v, want this node's, empty", got.Boot, got.Instances)
	}

	// The start check reads the record first: it tells LastRecord then, not the heartbeat.
	told = nil
	o.Instances = func() map[string]fleet.Instance {
		return map[string]fleet.Instance{"app3": {Port: 24002, AppID: "id3"}}
	}
	o.LastRecord = func(insts map[string]fleet.Instance) error { told = append(told, insts); return nil }
	r2 := New(o)
	if err := r2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r2.Heartbeat(ctx, time.Now())
	if len(told) != 1 || len(told[0]) != 0 {
		t.Fatalf("LastRecord told %v at a restart over an empty record, want once, no instance", told)
	}
}

func readRecord(t *testing.T, st store.Store, name string) fleet.NodeRecord {
	t.Helper()
	o, err := st.Get(context.Background(), fleet.NodeKey(name))
	if err != nil {
		t.Fatal(err)
	}
	var rec fleet.NodeRecord
	if err := json.Unmarshal(o.Value, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
