package fleetsim

import (
	"net/http"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// The store wiped: its objects, the serial included, vanish (an unmounted disk, a
// wrong bucket) and come back later (remounted). A node that served a document keeps
// serving it, through its passes and its restarts (docs/design.md §5/§6: a wiped store
// is an outage), and a pass that listed the wiped store never derives from it: not
// when the wipe lands between its serial read and its listing (the re-check), nor when
// a restarted node finds the serial missing (its remembered identity).

// wiping: a wipe is armed or the store is wiped.
func (s *sim) wiping() bool { return s.wiped != nil || s.wipeOn != nil }

// crash stops n; it is back after down steps, without its state dir when lose.
func (s *sim) crash(n *simNode, down int, lose bool) {
	n.downRev = s.servedRev(n)
	// served.json as the last pass handed it over: Run's saver writes it at once, and
	// nothing reads the state dir before the restart (saved here, not after every pass:
	// the writes and their syscalls were a seventh of the simulator's CPU).
	n.step.SaveServed()
	n.srv.Close()
	n.srv, n.h = nil, nil
	n.downUntil, n.loseState = s.step+down, lose
	s.logf("%s crashes (state dir lost: %v), back at step %d", n.name, lose, n.downUntil)
}

// servedRev is the revision n serves, "" for none or a document of no serial yet (a
// node that never saw a serial accepts the first it finds).
func (s *sim) servedRev(n *simNode) string {
	rec := s.do(n, http.MethodGet, api.PathIngress+api.FormatRoutes, ingressToken, nil, nil)
	if rec.Code != http.StatusOK || rec.Header().Get(api.HeaderEpoch) == "" {
		return ""
	}
	return rec.Header().Get(api.HeaderRevision)
}

// wipeEvent wipes the store now or within a node's next pass, and sometimes crashes a
// node (state dir kept) whose restart's first pass sees the store come back between
// its listing and its re-read of the serial.
func (s *sim) wipeEvent() {
	if s.wiping() || s.restored || s.losing() {
		return
	}
	s.remountAt = s.step + 1 + s.rng.IntN(10)
	if up := s.up(); len(up) > 0 && s.rng.IntN(2) == 0 {
		n := pick(s.rng, up)
		s.wipeOn, n.wipeRev = n, s.servedRev(n)
		s.logf("the store is wiped within %s's next pass, after its serial read", n.name)
	} else {
		s.wipe(nil)
	}
	if up := s.up(); len(up) > 0 && s.rng.IntN(2) == 0 {
		m := pick(s.rng, up)
		s.crash(m, 1+s.rng.IntN(3), false)
		s.remountOn, s.remountAt = m, max(s.remountAt, m.downUntil+3)
		s.logf("the store comes back within %s's first pass after its listing, at step %d at the latest", m.name, s.remountAt)
	}
}

// wipe empties the store (on: the node whose pass it lands in, its revision recorded
// when armed). What the model knows of applications and claims is unsure until settle
// reads the store: writes through nodes that have not seen the wipe yet reach the
// wiped store.
func (s *sim) wipe(on *simNode) {
	s.wipeOn = nil
	s.wiped = s.st.snapshot()
	s.st.restore(map[string]memObject{})
	for _, n := range s.nodes {
		switch {
		case n == on:
		case n.srv != nil:
			n.wipeRev = s.servedRev(n)
		default:
			n.wipeRev = n.downRev
		}
	}
	for i := range apps {
		s.m.unsureApps[appName(i)] = true
	}
	for _, h := range claimHosts {
		s.m.unsureClaims[h] = true
	}
	s.logf("store wiped until step %d", s.remountAt)
}

// remount puts the wiped objects back (what was written to the wiped store is gone). A
// node that never saw a serial accepts the wiped store and mints one in it; the nodes
// that saw it find the remounted store foreign, as a restored one.
func (s *sim) remount() {
	if _, minted := s.st.snapshot()[store.SerialKey]; minted {
		s.restoredStore()
		s.logf("(a serial was minted in the wiped store)")
	}
	s.st.restore(s.wiped)
	s.wiped, s.remountOn = nil, nil
	for _, n := range s.nodes {
		n.wipeRev = ""
	}
	s.logf("store remounted")
}

// hook runs before each request of n that reaches the store.
func (s *sim) hook(n *simNode, op, key string) {
	switch {
	case op == "put":
		s.interleaved(n, key)
	case s.inPass != n:
	case op == "list":
		s.listed = true
		if s.wipeOn == n && key == fleet.PrefixApps {
			s.wipe(n)
		}
	case key == store.SerialKey:
		if s.listed && s.remountOn == n && s.wiped != nil {
			s.remount()
		}
		s.listed = false
	}
}
