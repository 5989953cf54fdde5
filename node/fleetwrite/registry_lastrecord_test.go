package fleetwrite

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// TestANewStateDirNeverReissuesAPortItsLastRecordPublishes: a node restarted without
// its state dir issues no port before it read its last record, then never a port that
// record publishes to another application until a record of its own is announced and
// ports.quarantine has passed (with -statelost, fleetsim's seed 3 gave app3 the port
// app1 had while a peer still routed app1's host there).
func TestANewStateDirNeverReissuesAPortItsLastRecordPublishes(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "instances.json")
	reg := openTestRegistry(t, path)
	reg.now = func() time.Time { return now }
	reg.RequireLastRecord()

	if _, _, _, err := reg.Allocate("app3", "id3"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("allocate before the last record was read: %v, want store.ErrUnavailable (503)", err)
	}
	p := 24000
	if _, _, _, err := reg.Set("app3", "id3", &p, true); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("set before the last record was read: %v, want store.ErrUnavailable (503)", err)
	}

	// The last record published app1 on 24000 and app2 on 24004.
	if err := reg.HoldLastRecord(map[string]fleet.Instance{
		"app1": {Port: 24000, Ready: true, AppID: "id1"},
		"app2": {Port: 24004, Ready: true, AppID: "id2"},
	}); err != nil {
		t.Fatal(err)
	}
	_, ports := mustAllocate(t, reg, "app3", "id3")
	if ports != [2]int{24001, 24002} {
		t.Fatalf("app3 got %v, want [24001 24002] (24000 is app1's by the last record)", ports)
	}
	if _, _, _, err := reg.Set("app4", "id4", &p, true); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("set app4 to app1's last port: %v, want ErrPortTaken", err)
	}
	// The same application and incarnation takes its port back.
	mustSet(t, reg, "app1", "id1", 24000)

	// Held past any quarantine until a record of this process is announced; then for
	// ports.quarantine, as a released port.
	now = now.Add(time.Hour)
	if _, ports := mustAllocate(t, reg, "app5", "id5"); ports[0] == 24004 || ports[1] == 24004 {
		t.Fatalf("app5 got %v: app2's last port before any record of this run was announced", ports)
	}
	// And across a restart of the node with its state dir, before the announce.
	reg = openTestRegistry(t, path)
	reg.now = func() time.Time { return now }
	if err := reg.RecordAnnounced(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := reg.Set("app6", "id6", ptr(24004), true); !errors.Is(err, ErrPortTaken) {
		t.Fatalf("set app6 to app2's last port within the quarantine after the announce: %v, want ErrPortTaken", err)
	}
	now = now.Add(time.Minute) // openTestRegistry's ports.quarantine
	mustSet(t, reg, "app6", "id6", 24004)
}

// TestTheLastRecordNeverQuarantinesAPortTheRegistryHolds: the registry knows better than
// a record: a port it gives (an instance or a pair's idle port) is not held for the
// application the record names.
func TestTheLastRecordNeverQuarantinesAPortTheRegistryHolds(t *testing.T) {
	reg := openTestRegistry(t, filepath.Join(t.TempDir(), "instances.json"))
	reg.RequireLastRecord() // a new file: no port until HoldLastRecord
	_, _, _, err := reg.Allocate("shop", "id-shop")
	if err == nil {
		t.Fatal("allocate before the last record was read over a new file: want an error")
	}
	if err := reg.HoldLastRecord(nil); err != nil {
		t.Fatal(err)
	}
	_, ports := mustAllocate(t, reg, "shop", "id-shop") // [24000 24001]
	if err := reg.HoldLastRecord(map[string]fleet.Instance{"blog": {Port: ports[1], AppID: "id-blog"}}); err != nil {
		t.Fatal(err)
	}
	if q := quarantinedPorts(reg); len(q) != 0 {
		t.Fatalf("quarantined %v: a port of shop's pair held for blog", q)
	}
	mustSet(t, reg, "shop", "id-shop", ports[1]) // the move within the pair still costs nothing
}
