package self

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scafo/ingress/render/fleet"
)

// One address, one node (issue 39, item 5).
//
// A node publishes its instances at node.address:port. Two live nodes with one
// node.address (the default 127.0.0.1 left on two machines, a copied file) publish
// upstreams that are one socket: a port allocated on each lands two accounts' hosts on
// one listener. The rule is the name rule's (name.go):
//
//   - At start (Start, after the name check) a node lists nodes/ and refuses to start
//     when a live record (fleet.NodeLive: seen within reconcile.nodeTTL of this node's
//     clock, either side) of another name carries its node.address, naming that node
//     and its age; it writes nothing. A record dated further ahead (a clock ahead, a
//     planted record) holds nothing: it is logged and the node starts. A record of its
//     own node id is this installation under an earlier name, not another node; a live
//     record without a boot identity (a node that predates it, a record planted by
//     hand) is accepted with a warning and reported below, as the name rule accepts
//     one. A store that cannot be read does not stop the node.
//   - While it runs (two nodes started at once both pass that check; a peer restarted
//     with an edited address), the heartbeat hands ObserveFleet the reconcile pass's
//     view of nodes/: a live node of another name on this node's address is reported (an
//     error log, /v1/status addressWarning, scafo_node_address_conflict) until it is
//     gone or stale. A record of this node id counts too once written after this
//     process started (a copied state dir running under another name). Nothing tells
//     which of the two is right: both keep running.
//   - A loopback or unspecified node.address in a fleet of more than one live node is
//     reported (a warning log naming node.address, addressWarning,
//     scafo_node_address_loopback): peers dial it and reach themselves. A single node
//     on 127.0.0.1 is the quickstart and is not reported.

// sameAddress reports whether two node.address values are one IP (an IPv4-mapped IPv6
// address is its IPv4 address); values that are not IPs compare as written.
func sameAddress(a, b string) bool {
	pa, ea := netip.ParseAddr(a)
	pb, eb := netip.ParseAddr(b)
	if ea != nil || eb != nil {
		return a == b
	}
	return pa.Unmap() == pb.Unmap()
}

// localAddress reports whether a is a loopback or unspecified IP: one no peer can dial.
func localAddress(a string) bool {
	p, err := netip.ParseAddr(a)
	return err == nil && (p.Unmap().IsLoopback() || p.IsUnspecified())
}

// otherHolder reports whether rec, a live record, is another node holding this node's
// address: another name, and not this installation under an earlier name.
func (s *Record) otherHolder(rec fleet.NodeRecord) bool {
	return rec.Name != s.o.Name && sameAddress(rec.Address, s.o.Address) &&
		(rec.Boot == nil || rec.Boot.Node != s.nodeID)
}

// twinHolder reports whether rec, a live record of another name on this node's address,
// carries this node's id but was written by another process since this one started: a
// copy of this state dir (a cloned machine image) running as another node, not this
// installation under an earlier name, whose last record predates this process
// (TestATwinOfThisNodeIDOnItsAddressIsReported).
func (s *Record) twinHolder(rec fleet.NodeRecord) bool {
	return rec.Name != s.o.Name && sameAddress(rec.Address, s.o.Address) &&
		rec.Boot != nil && rec.Boot.Node == s.nodeID && rec.Boot.ID != s.bootID && rec.Seen.After(s.started)
}

// checkAddress refuses to start when another live node publishes this node's address.
func (s *Record) checkAddress(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	es, err := s.o.Store.List(ctx, fleet.PrefixNodes)
	if err != nil {
		s.o.Log.Warn("cannot check whether another live node holds this node's address; starting", "err", err)
		return nil
	}
	own := fleet.NodeKey(s.o.Name)
	for _, e := range es {
		if e.Key == own || !strings.HasSuffix(e.Key, ".json") {
			continue
		}
		obj, err := s.o.Store.Get(ctx, e.Key)
		if err != nil {
			continue // gone since the list, or unreadable: the running check still applies
		}
		var rec fleet.NodeRecord
		if json.Unmarshal(obj.Value, &rec) != nil {
			continue
		}
		if !s.otherHolder(rec) {
			continue
		}
		if ahead, skew := fleet.NodeAhead(rec.Seen, s.started, s.o.NodeTTL); ahead {
			s.o.Log.Warn("a record dated more than reconcile.nodeTTL ahead of this node's clock publishes this node's node.address: not live (a clock ahead, or a planted record), so it holds nothing; starting",
				"address", s.o.Address, "record", e.Key, "seen", rec.Seen.UTC(), "skew", skew.Round(time.Second), "nodeTTL", s.o.NodeTTL)
			continue
		}
		if !fleet.NodeLive(rec.Seen, s.started, s.o.NodeTTL) {
			continue
		}
		age := s.started.Sub(rec.Seen)
		if rec.Boot == nil {
			s.o.Log.Warn("a live record without a boot identity (a node that predates it, or one written by hand) publishes this node's node.address; starting, and reporting it while it stays live",
				"address", s.o.Address, "record", e.Key, "age", age.Round(time.Millisecond))
			continue
		}
		return fmt.Errorf("node.address %q is taken by another live node: %s (node %q, written %s ago) publishes it; "+
			"two nodes with one address publish their instances at one socket and route one account's hosts to another's: "+
			"set this node's own node.address, or, if that node is gone for good, start this one once its record is older than reconcile.nodeTTL (%s)",
			s.o.Address, e.Key, rec.Name, age.Round(time.Millisecond), s.o.NodeTTL)
	}
	return nil
}

// addressGuard is what the running check last found.
type addressGuard struct {
	mu sync.Mutex
	// holders are the other live nodes on this node's address (names, sorted); live
	// is how many live nodes the fleet has, this one included.
	holders []string
	live    int
	// loopback: node.address is loopback or unspecified and live > 1.
	loopback bool
}

// AddressReport is what the running check reports of this node's node.address.
type AddressReport struct {
	// Address is this node's node.address.
	Address string
	// SharedWith are the other live nodes publishing it (sorted names).
	SharedWith []string
	// Local: the address is loopback or unspecified in a fleet of LiveNodes > 1.
	Local     bool
	LiveNodes int
}

// ObserveFleet checks the fleet's node records (the reconcile pass's view, each Seen
// its observed liveness) against this node's address, and logs what changed.
func (s *Record) ObserveFleet(nodes []fleet.NodeRecord, now time.Time) {
	var holders []string
	live := 0
	seenSelf := false
	for _, n := range nodes {
		if !fleet.NodeLive(n.Seen, now, s.o.NodeTTL) {
			continue
		}
		live++
		if n.Name == s.o.Name {
			seenSelf = true
		} else if s.otherHolder(n) || s.twinHolder(n) {
			holders = append(holders, n.Name)
		}
	}
	if !seenSelf {
		live++ // this node is live whether or not the pass has read its record yet
	}
	slices.Sort(holders)
	local := live > 1 && localAddress(s.o.Address)
	g := &s.address
	g.mu.Lock()
	newHolders := !slices.Equal(holders, g.holders)
	newLocal := local && !g.loopback
	g.holders, g.live, g.loopback = holders, live, local
	g.mu.Unlock()
	if newHolders && len(holders) > 0 {
		s.o.Log.Error("another live node publishes this node's node.address: both publish their instances at one socket; give each node its own node.address",
			"address", s.o.Address, "name", s.o.Name, "others", holders)
	}
	if newLocal {
		s.o.Log.Warn("node.address is a loopback or unspecified address in a fleet of more than one node: peers dial it and reach themselves; set node.address to this node's address on the fleet's private network",
			"address", s.o.Address, "liveNodes", live)
	}
}

// AddressReport is a shared or local node.address (nil when there is nothing to report).
func (s *Record) AddressReport() *AddressReport {
	g := &s.address
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.holders) == 0 && !g.loopback {
		return nil
	}
	return &AddressReport{Address: s.o.Address, SharedWith: slices.Clone(g.holders), Local: g.loopback, LiveNodes: g.live}
}
