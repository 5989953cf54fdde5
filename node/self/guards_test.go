package self

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/node/store/dir"
	"github.com/scafo/ingress/render/fleet"
)

// The guards that one name is one node and one address one node (name.go, address.go),
// driven through the record's constructor, Start and its steps on the test's clock. How
// the node shows them (/v1/status, metrics) is the root's TestTheRecordsReportsReachStatusAndMetrics.

const ttl = time.Minute

// guarded is a record over a dir store, its log, and its gauges.
type guarded struct {
	*Record
	st   store.Store
	logs *bytes.Buffer
	reg  *prometheus.Registry
}

func newGuarded(t *testing.T, st store.Store, name, address, nodeID string) *guarded {
	t.Helper()
	if st == nil {
		st = dirStore(t)
	}
	logs := &bytes.Buffer{}
	o := options(st, name, address, nodeID)
	o.Log = slog.New(slog.NewTextHandler(logs, nil))
	g := &guarded{Record: New(o), st: st, logs: logs, reg: prometheus.NewRegistry()}
	g.RegisterMetrics(g.reg)
	return g
}

// options are a record's options over st for a test: the TTL, API port 7400, no
// settings, no instances, a discarded log.
func options(st store.Store, name, address, nodeID string) Options {
	return Options{Store: st, Identity: &store.Identity{}, Log: slog.New(slog.DiscardHandler),
		NodeID: nodeID, Name: name, Address: address, APIPort: 7400, NodeTTL: ttl,
		Settings: func() fleet.NodeSettings { return fleet.NodeSettings{} }, Instances: func() map[string]fleet.Instance { return nil },
		OnAnnounced: func() {}}
}

// dirStore is a dir store in a temporary directory.
func dirStore(t *testing.T) store.Store {
	t.Helper()
	d, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// gauge is the value of one of the record's gauges.
func (g *guarded) gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// plant writes a record at nodes/<key>.json: another node's name, address, seen and
// boot (nil: none).
func plant(t *testing.T, st store.Store, key string, rec fleet.NodeRecord) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), fleet.NodeKey(key), b, store.Condition{}); err != nil {
		t.Fatal(err)
	}
}

func rawRecord(t *testing.T, st store.Store, key string) string {
	t.Helper()
	obj, err := st.Get(context.Background(), fleet.NodeKey(key))
	if err != nil {
		return "absent"
	}
	return string(obj.Value)
}

var elsewhere = &fleet.Boot{Node: "elsewhere", ID: "b00b"}

// TestTheStartCheckRefusesOnlyALiveHolderOfTheNameOrAddress: another installation's
// live record at this node's name, or another live node publishing its address (an
// IPv4-mapped spelling included), refuses the start, naming that record's address or
// name and age, and nothing is written. This node's previous run, a stale record, a
// record without a boot identity (warned about) and a record dated beyond the TTL ahead
// (warned about, naming the skew) hold nothing.
func TestTheStartCheckRefusesOnlyALiveHolderOfTheNameOrAddress(t *testing.T) {
	now := time.Now().UTC()
	for _, tc := range []struct {
		name, key string
		planted   fleet.NodeRecord
		self      string // this node's name, address
		address   string
		refused   []string // what the refusal names (nil: started)
		logged    []string // what the log says
	}{
		{name: "a live node of the name", key: "vps-a", planted: fleet.NodeRecord{Name: "vps-a", Address: "127.0.0.11", APIPort: 7400, Seen: now, Boot: elsewhere},
			self: "vps-a", address: "127.0.0.12", refused: []string{"127.0.0.11:7400", " ago"}},
		{name: "this node's previous run", key: "vps-a", planted: fleet.NodeRecord{Name: "vps-a", Address: "127.0.0.11", APIPort: 7400, Seen: now, Boot: &fleet.Boot{Node: "n1", ID: "prev"}},
			self: "vps-a", address: "127.0.0.11", logged: []string{"previous run"}},
		{name: "a live node on the address", key: "vps-a", planted: fleet.NodeRecord{Name: "vps-a", Address: "127.0.0.21", APIPort: 7400, Seen: now, Boot: elsewhere},
			self: "vps-b", address: "127.0.0.21", refused: []string{`node.address "127.0.0.21"`, `"vps-a"`, " ago"}},
		{name: "a live node on the mapped address", key: "vps-a", planted: fleet.NodeRecord{Name: "vps-a", Address: "127.0.0.21", APIPort: 7400, Seen: now, Boot: elsewhere},
			self: "vps-b", address: "::ffff:127.0.0.21", refused: []string{`"vps-a"`}},
		{name: "a stale node on the address", key: "vps-old", planted: fleet.NodeRecord{Name: "vps-old", Address: "127.0.0.22", APIPort: 7400, Seen: now.Add(-2 * ttl), Boot: elsewhere},
			self: "vps-b", address: "127.0.0.22"},
		{name: "a bootless record on the address", key: "vps-old", planted: fleet.NodeRecord{Name: "vps-old", Address: "127.0.0.24", APIPort: 7400, Seen: now},
			self: "vps-b", address: "127.0.0.24", logged: []string{"level=WARN", "without a boot identity"}},
		{name: "a record a year ahead on the address", key: "ghost", planted: fleet.NodeRecord{Name: "ghost", Address: "127.0.0.44", APIPort: 7400, Seen: now.Add(8760 * time.Hour), Boot: elsewhere},
			self: "vps-b", address: "127.0.0.44", logged: []string{"record=nodes/ghost.json", "skew=87"}},
		{name: "a record a year ahead at the name", key: "vps-c", planted: fleet.NodeRecord{Name: "vps-c", Address: "127.0.0.45", APIPort: 7400, Seen: now.Add(8760 * time.Hour), Boot: elsewhere},
			self: "vps-c", address: "127.0.0.1", logged: []string{"record=nodes/vps-c.json", "skew=87"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuarded(t, nil, tc.self, tc.address, "n1")
			plant(t, g.st, tc.key, tc.planted)
			before := rawRecord(t, g.st, tc.self)
			err := g.Start(context.Background())
			for _, want := range tc.refused {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("start: %v, want refused naming %s", err, want)
				}
			}
			if tc.refused == nil && err != nil {
				t.Errorf("start refused: %v", err)
			}
			if after := rawRecord(t, g.st, tc.self); after != before {
				t.Errorf("the start check wrote %s's record: %s", tc.self, after)
			}
			for _, want := range tc.logged {
				if !strings.Contains(g.logs.String(), want) {
					t.Errorf("the log does not say %q:\n%s", want, g.logs)
				}
			}
			if err != nil {
				return
			}
			// Started: a heartbeat over the fleet as a pass sees it reports no one.
			g.Heartbeat(context.Background(), time.Now())
			g.ObserveFleet([]fleet.NodeRecord{tc.planted}, time.Now())
			// A bootless record is reported while live, not refused.
			a, bootless := g.AddressReport(), tc.planted.Boot == nil
			if (a != nil) != bootless || bootless && !slices.Equal(a.SharedWith, []string{tc.key}) {
				t.Errorf("address report %+v (a bootless holder: %v)", a, bootless)
			}
			if c := g.Conflict(time.Now()); c != nil {
				t.Errorf("name reported: %+v", c)
			}
		})
	}
}

// TestAnotherWriterOfTheRecordIsReportedWhateverItsClockUntilStale: a record written
// over this node's own (another node of the name, its clock far behind) is caught at
// the next heartbeat (the write is conditional on this node's last), logged as an error
// naming the other's address, reported (Conflict, scafo_node_name_conflict) and
// overwritten; the report clears once the other's last write is older than the TTL.
func TestAnotherWriterOfTheRecordIsReportedWhateverItsClockUntilStale(t *testing.T) {
	g := newGuarded(t, nil, "vps-a", "127.0.0.1", "n1")
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	g.Heartbeat(ctx, now)
	plant(t, g.st, "vps-a", fleet.NodeRecord{Name: "vps-a", Address: "10.9.9.9", APIPort: 7400, Seen: now.Add(-30 * time.Second), Boot: elsewhere})
	g.Heartbeat(ctx, now)
	if c := g.Conflict(now); c == nil || Address(c.Record) != "10.9.9.9:7400" || g.gauge(t, "scafo_node_name_conflict") != 1 {
		t.Fatalf("conflict %+v, gauge %v: want 10.9.9.9:7400 reported", c, g.gauge(t, "scafo_node_name_conflict"))
	}
	if logs := g.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "10.9.9.9") {
		t.Errorf("no error logged naming the other writer:\n%s", logs)
	}
	var rec fleet.NodeRecord
	if err := json.Unmarshal([]byte(rawRecord(t, g.st, "vps-a")), &rec); err != nil || rec.Address != "127.0.0.1" {
		t.Errorf("the record after the heartbeat: %+v %v, want this node's again", rec, err)
	}
	if c := g.Conflict(time.Now().Add(2 * ttl)); c != nil {
		t.Errorf("still reported a TTL after the other's last write: %+v", c)
	}
}

// TestAnAddressSharedOrLoopbackInAFleetIsReportedWhileLive: the fleet as a pass sees it
// (ObserveFleet) reports another live node on this node's address (an error naming it,
// sharedWith, scafo_node_address_conflict), and a loopback address once the fleet has a
// second live node (a warning naming node.address, scafo_node_address_loopback), never
// for a node alone; each clears once the other's record is stale.
func TestAnAddressSharedOrLoopbackInAFleetIsReportedWhileLive(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name, address string
		other         fleet.NodeRecord
		gauge, log    string
		want          func(a *AddressReport) bool
	}{
		{"shared", "10.83.0.23", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.23", Seen: now, Boot: elsewhere},
			"scafo_node_address_conflict", "level=ERROR", func(a *AddressReport) bool { return slices.Equal(a.SharedWith, []string{"vps-b"}) && !a.Local }},
		{"loopback", "127.0.0.1", fleet.NodeRecord{Name: "vps-b", Address: "10.83.0.2", Seen: now, Boot: elsewhere},
			"scafo_node_address_loopback", "level=WARN", func(a *AddressReport) bool { return a.Local && a.LiveNodes == 2 && len(a.SharedWith) == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuarded(t, nil, "vps-a", tc.address, "n1")
			self := fleet.NodeRecord{Name: "vps-a", Address: tc.address, Seen: now, Boot: g.boot()}
			g.ObserveFleet([]fleet.NodeRecord{self}, now)
			if a := g.AddressReport(); a != nil || g.gauge(t, tc.gauge) != 0 || g.logs.Len() != 0 {
				t.Fatalf("a node alone: %+v, %s %v, log %s", a, tc.gauge, g.gauge(t, tc.gauge), g.logs)
			}
			g.ObserveFleet([]fleet.NodeRecord{self, tc.other}, now)
			if a := g.AddressReport(); a == nil || !tc.want(a) || a.Address != tc.address || g.gauge(t, tc.gauge) != 1 {
				t.Errorf("with %s live: %+v, %s %v", tc.other.Name, a, tc.gauge, g.gauge(t, tc.gauge))
			}
			if logs := g.logs.String(); !strings.Contains(logs, tc.log) || !strings.Contains(logs, "node.address") {
				t.Errorf("not logged (%s, naming node.address):\n%s", tc.log, logs)
			}
			later := now.Add(ttl + time.Second)
			self.Seen = later
			g.ObserveFleet([]fleet.NodeRecord{self, tc.other}, later)
			if a := g.AddressReport(); a != nil || g.gauge(t, tc.gauge) != 0 {
				t.Errorf("once %s is stale: %+v, %s %v", tc.other.Name, a, tc.gauge, g.gauge(t, tc.gauge))
			}
		})
	}
}
