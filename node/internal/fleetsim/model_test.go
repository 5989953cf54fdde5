package fleetsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store"
	"github.com/scafo/ingress/render/fleet"
)

// The model: what the admin's and the tenants' answered writes say the fleet is,
// written independently of the node's code (no derivation, no render).

const apps = 4

// claimHosts: x.wild.example.org is under the wildcard, claimable by its account only.
var claimHosts = []string{"shop.example.org", "blog.example.org", "*.wild.example.org", "x.wild.example.org", "api.example.net"}

// accounts are the tenants; an application is created in one, and re-created (after a
// delete) in the same or another.
var accounts = []string{"ta", "tb"}

func appName(i int) string { return fmt.Sprintf("app%d", i) }

type required struct {
	app    string
	serial uint64
}

type modelApp struct {
	placement []string
}

type modelInst struct {
	port  int
	pair  []int // the ports it owns (port among them)
	ready bool
}

// instKey is an application's instance on a node.
type instKey struct {
	node string
	app  string
}

type portKey struct {
	node string
	port int
}

type model struct {
	apps    map[string]modelApp
	account map[string]string // application → its account, as last written (kept after a delete)
	// tokens: each application's token for its incarnation now; old: tokens of its
	// earlier incarnations, which nothing may accept.
	tokens    map[string]string
	oldTokens map[string][]string
	claims    map[string]string // host → application
	// unsureApps, unsureClaims and unsureInsts were written with a 5xx answer: the write
	// may have been stored or not; settle reads what was (the store, the node).
	unsureApps   map[string]bool
	unsureClaims map[string]bool
	unsureInsts  map[instKey]bool
	// required are the hosts (→ application) every document of that serial or later
	// must route: a 2xx write's bump, with no delete tried since.
	required map[string]required
	// insts are the instances each node's process holds (node → app → port); owner
	// is which application a node's port is given to now.
	insts map[string]map[string]modelInst
	owner map[portKey]string
	// orphan: a port whose instance belongs to an incarnation of app that ended (deleted
	// or re-created) at serial: no document of that serial or later routes app there.
	orphan map[portKey]required
}

func newModel() *model {
	return &model{apps: map[string]modelApp{}, account: map[string]string{}, tokens: map[string]string{}, oldTokens: map[string][]string{}, claims: map[string]string{}, orphan: map[portKey]required{}, insts: map[string]map[string]modelInst{}, owner: map[portKey]string{},
		unsureApps: map[string]bool{}, unsureClaims: map[string]bool{}, unsureInsts: map[instKey]bool{}, required: map[string]required{}}
}

func ok2xx(code int) bool { return code >= 200 && code < 300 }

// adminWrite is one write of the admin through a random live node. Sometimes another
// write, through another node, lands in the middle of it: at its first conditional write
// of an application or a claim (the store's CAS decides; the model takes the writes in
// the order they were answered).
func (s *sim) adminWrite() {
	up := s.up()
	if len(up) == 0 {
		return
	}
	n := pick(s.rng, up)
	if len(up) > 1 && s.rng.IntN(5) == 0 {
		m := pick(s.rng, up)
		for m == n {
			m = pick(s.rng, up)
		}
		s.interleaveOn, s.interleaveNode, s.interleave = n, m, func() {
			s.logf("(a write through %s lands in the middle of it)", m.name)
			s.adminWriteOn(m)
		}
		defer func() { s.interleaveOn, s.interleave = nil, nil }()
	}
	s.adminWriteOn(n)
}

// interleaved runs the write armed to land in the middle of one through n, at n's
// conditional write of key (once).
func (s *sim) interleaved(n *simNode, key string) {
	if s.interleave == nil || s.interleaveOn != n || !(strings.HasPrefix(key, fleet.PrefixApps) || strings.HasPrefix(key, fleet.PrefixDomains)) {
		return
	}
	w := s.interleave
	s.interleave = nil
	w()
}

func (s *sim) adminWriteOn(n *simNode) {
	app := appName(s.rng.IntN(apps))
	switch r := s.rng.IntN(10); {
	case r < 4:
		var placement []string
		for _, p := range s.nodes {
			if s.rng.IntN(3) > 0 {
				placement = append(placement, p.name)
			}
		}
		if placement == nil {
			placement = []string{}
		}
		acct := pick(s.rng, accounts)
		if a, ok := s.m.account[app]; ok && s.rng.IntN(8) > 0 {
			acct = a
		}
		rec := s.do(n, http.MethodPut, api.PathApps+"/"+app, adminToken, map[string]any{"account": acct, "placement": placement}, nil)
		s.logf("PUT app %s account %s placement %v via %s: %d", app, acct, placement, n.name, rec.Code)
		switch {
		case ok2xx(rec.Code):
			wasUnsure := s.m.unsureApps[app]
			if _, ok := s.m.apps[app]; ok && !wasUnsure && s.m.account[app] != acct {
				s.fail("app %s of account %s moved to account %s (%d)", app, s.m.account[app], acct, rec.Code)
			}
			s.m.apps[app] = modelApp{placement: placement}
			s.m.account[app] = acct
			delete(s.m.unsureApps, app)
			if rec.Code == http.StatusCreated {
				s.dropToken(app)
				// A new incarnation: the instances of an earlier one are orphans (swept).
				s.orphans(app, true)
			}
			if wasUnsure {
				// As a claim (claimOn): the same application stored by a write that answered
				// 5xx is answered 200 unchanged, announced by no bump (seed 205 of 250).
				s.logf("app %s answered %d over a write stored unannounced", app, rec.Code)
			} else {
				s.require(app+"."+platform, app)
			}
		case rec.Code >= 500:
			s.m.unsureApps[app] = true
		}
	case r < 5:
		rec := s.do(n, http.MethodDelete, api.PathApps+"/"+app, adminToken, nil, nil)
		s.logf("DELETE app %s via %s: %d", app, n.name, rec.Code)
		for h, r := range s.m.required {
			if r.app == app {
				delete(s.m.required, h)
			}
		}
		if rec.Code >= 500 {
			s.m.unsureApps[app] = true
			for h, a := range s.m.claims {
				if a == app {
					s.m.unsureClaims[h] = true
				}
			}
		}
		if ok2xx(rec.Code) {
			// Its instances are released by their nodes' sweeps. Over a delete stored
			// unannounced (an unsure app), a 2xx may announce nothing: no serial is known.
			s.orphans(app, !s.m.unsureApps[app])
			delete(s.m.apps, app)
			delete(s.m.unsureApps, app)
			s.dropToken(app)
			for h, a := range s.m.claims {
				if a == app {
					delete(s.m.claims, h)
				}
			}
		}
	case r < 8:
		host := pick(s.rng, claimHosts)
		if other, ok := s.m.claims[wildPair[host]]; ok && s.rng.IntN(2) == 0 {
			app = other // the wildcard and a name under it, by one account, or two
		}
		s.claimOn(n, app, host)
	default:
		host := pick(s.rng, claimHosts)
		rec := s.do(n, http.MethodDelete, api.PathApps+"/"+app+"/domains/"+host, adminToken, nil, nil)
		s.logf("DELETE claim %s of %s via %s: %d", host, app, n.name, rec.Code)
		if r, ok := s.m.required[host]; ok && r.app == app {
			delete(s.m.required, host)
		}
		if rec.Code >= 500 {
			s.m.unsureClaims[host] = true
		}
		if ok2xx(rec.Code) && s.m.claims[host] == app {
			delete(s.m.claims, host)
		}
	}
}

// instanceWrite is a tenant's instance change on a random live node: one started
// (allocated, then ready), one dying (not ready), one stopped (released).
func (s *sim) instanceWrite() {
	up := s.up()
	if len(up) == 0 {
		return
	}
	n := pick(s.rng, up)
	app := appName(s.rng.IntN(apps))
	path := api.PathNodeInstances + "/" + app
	tok := s.tenantToken(n, app)
	switch r := s.rng.IntN(10); {
	case r < 5:
		rec := s.do(n, http.MethodPost, path, tok, nil, nil)
		var inst struct {
			Port  int    `json:"port"`
			Ports [2]int `json:"ports"`
		}
		if ok2xx(rec.Code) && json.Unmarshal(rec.Body.Bytes(), &inst) == nil {
			s.holds(n, app, inst.Port, inst.Ports[:]...)
			rec = s.do(n, http.MethodPut, path, tok, map[string]any{"ready": true}, nil)
			if ok2xx(rec.Code) {
				s.ready(n, app, true)
			}
		}
		s.unsureInst(n, app, rec.Code)
		s.logf("instance %s on %s started (ports %v): %d", app, n.name, inst.Ports, rec.Code)
	case r < 7:
		rec := s.do(n, http.MethodPut, path, tok, map[string]any{"ready": false}, nil)
		s.logf("instance %s on %s dies (not ready): %d", app, n.name, rec.Code)
		if ok2xx(rec.Code) {
			s.ready(n, app, false)
		}
		s.unsureInst(n, app, rec.Code)
	default:
		rec := s.do(n, http.MethodDelete, path, tok, nil, nil)
		s.logf("instance %s on %s released: %d", app, n.name, rec.Code)
		if ok2xx(rec.Code) {
			s.holds(n, app, 0)
		}
		s.unsureInst(n, app, rec.Code)
	}
	if s.rng.IntN(5) > 1 {
		// The instance change's kick: the record rewritten now (else at the next beat).
		n.step.Heartbeat(context.Background(), s.clock(n))
	}
}

func (s *sim) unsureInst(n *simNode, app string, code int) {
	k := instKey{n.name, app}
	if code >= 500 {
		s.m.unsureInsts[k] = true
	} else if ok2xx(code) {
		delete(s.m.unsureInsts, k)
	}
}

// require records that the hosts's route to app is in every document from the store's
// serial now on (until a delete of it is tried).
// orphans: app's incarnation ended (a 2xx delete or re-create): its instances are
// orphans its nodes sweep, never routed to app from the store's serial now on.
func (s *sim) orphans(app string, mark bool) {
	serial, _, err := store.ReadSerial(context.Background(), s.st)
	mark = mark && err == nil && !s.restored && s.wiped == nil
	for _, n := range s.nodes {
		if i, ok := s.m.insts[n.name][app]; ok && mark {
			for _, p := range i.pair {
				s.m.orphan[portKey{n.name, p}] = required{app: app, serial: serial}
			}
		}
		s.holds(n, app, 0)
	}
}

func (s *sim) require(host, app string) {
	if s.restored || s.wiped != nil {
		return // serials are not comparable with those served until the operator adopts the store
	}
	if r, ok := s.m.required[host]; ok && r.app == app {
		return
	}
	n, _, err := store.ReadSerial(context.Background(), s.st)
	if err != nil {
		s.t.Fatal(err)
	}
	s.m.required[host] = required{app: app, serial: n}
}

// holds records that n's process gives port (and the pair's other) to app now (0: app
// has no instance there). A port given again keeps its readiness.
func (s *sim) holds(n *simNode, app string, port int, pair ...int) {
	insts := s.m.insts[n.name]
	if insts == nil {
		insts = map[string]modelInst{}
		s.m.insts[n.name] = insts
	}
	old, had := insts[app]
	for _, p := range old.pair {
		if had && s.m.owner[portKey{n.name, p}] == app {
			delete(s.m.owner, portKey{n.name, p})
		}
	}
	delete(insts, app)
	if port != 0 {
		pair = append(pair, port)
		insts[app] = modelInst{port: port, pair: pair, ready: had && old.port == port && old.ready}
		for _, p := range pair {
			s.m.owner[portKey{n.name, p}] = app
			delete(s.m.orphan, portKey{n.name, p})
		}
	}
}

func (s *sim) ready(n *simNode, app string, ready bool) {
	if i, ok := s.m.insts[n.name][app]; ok {
		i.ready = ready
		s.m.insts[n.name][app] = i
	}
}

// forget is a node's state dir lost: its process holds no instance any more.
func (s *sim) forget(n *simNode) {
	for app := range s.m.insts[n.name] {
		s.holds(n, app, 0)
	}
}

// expectedHosts is the document's routes by the model: each application's platform
// host and the claims.
func (m *model) expectedHosts() []string {
	var hs []string
	for app := range m.apps {
		hs = append(hs, app+"."+platform+"="+app)
	}
	for h, app := range m.claims {
		if _, ok := m.apps[app]; !ok {
			app = "scafo-unowned" // a claim whose holder is gone holds its host, routing nowhere (§3)
		} else if m.coveredByAnother(h, app) {
			continue
		}
		hs = append(hs, h+"="+app)
	}
	slices.Sort(hs)
	return hs
}

// nodeOfAddress maps an upstream address to its node's name and port.
func (s *sim) nodeOfAddress(addr string) (string, int, bool) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return "", 0, false
	}
	for _, n := range s.nodes {
		if n.cfg.Node.Address == ap.Addr().String() {
			return n.name, int(ap.Port()), true
		}
	}
	return "", 0, false
}

// expectedUpstreams is app's upstreams by the model: its ready instances on the nodes
// of its placement, as node:port, sorted.
func (s *sim) expectedUpstreams(app string) []string {
	var out []string
	for _, n := range s.m.apps[app].placement {
		if i, ok := s.m.insts[n][app]; ok && i.ready {
			out = append(out, n+":"+strconv.Itoa(i.port))
		}
	}
	slices.Sort(out)
	return out
}

// resolve reads what the writes answered 5xx did: the stored applications and claims,
// each node's instances (its own registry, GET /v1/node/instances).
func (s *sim) resolve() {
	ctx := context.Background()
	for app := range s.m.unsureApps {
		// A write answered 5xx may have stored a new incarnation (or a delete): its
		// instances of the old one are orphans each node sweeps; what each holds is read.
		for _, n := range s.nodes {
			s.m.unsureInsts[instKey{n.name, app}] = true
		}
		o, err := s.st.Get(ctx, fleet.AppKey(app))
		var a fleet.App
		switch {
		case err == nil && json.Unmarshal(o.Value, &a) == nil:
			s.m.apps[app] = modelApp{placement: a.Placement}
			s.m.account[app] = a.Account
		case errors.Is(err, store.ErrNotFound):
			delete(s.m.apps, app)
		default:
			s.t.Fatalf("reading %s: %v", app, err)
		}
		delete(s.m.unsureApps, app)
	}
	for host := range s.m.unsureClaims {
		o, err := s.st.Get(ctx, fleet.ClaimKey(host))
		var c fleet.Claim
		switch {
		case err == nil && json.Unmarshal(o.Value, &c) == nil:
			s.m.claims[host] = c.App
		case errors.Is(err, store.ErrNotFound):
			delete(s.m.claims, host)
		default:
			s.t.Fatalf("reading %s: %v", host, err)
		}
		delete(s.m.unsureClaims, host)
	}
	for k := range s.m.unsureInsts {
		delete(s.m.unsureInsts, k)
		var n *simNode
		for _, c := range s.nodes {
			if c.name == k.node {
				n = c
			}
		}
		app := k.app
		rec := s.do(n, http.MethodGet, api.PathNodeInstances, adminToken, nil, nil)
		var list struct {
			Instances []struct {
				App   string `json:"app"`
				Port  int    `json:"port"`
				Ready bool   `json:"ready"`
				Ports [2]int `json:"ports"`
			} `json:"instances"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &list) != nil {
			s.fail("listing %s's instances: %d %s", n.name, rec.Code, rec.Body.String())
			return
		}
		s.holds(n, app, 0)
		for _, i := range list.Instances {
			if i.App == app {
				s.holds(n, app, i.Port, i.Ports[:]...)
				s.ready(n, app, i.Ready)
			}
		}
	}
}

// claimOn is the admin's claim of host for app through n.
func (s *sim) claimOn(n *simNode, app, host string) {
	if s.interleave != nil && s.interleaveOn == n && s.rng.IntN(2) == 0 {
		// The write landing in the middle of this one claims the same host for another
		// application: the race exclusive claims are about.
		other := appName(s.rng.IntN(apps))
		m := s.interleaveNode
		s.interleave = func() {
			s.logf("(a claim through %s lands in the middle of it)", m.name)
			s.claimOn(m, other, host)
		}
	}
	rec := s.do(n, http.MethodPut, api.PathApps+"/"+app+"/domains/"+host, adminToken, nil, nil)
	s.logf("PUT claim %s → %s via %s: %d", host, app, n.name, rec.Code)
	switch {
	case ok2xx(rec.Code):
		// Exclusive claims across accounts by coverage: a host another tenant's
		// application holds, or covers with a wildcard, or that covers one of its, is
		// refused, whoever's write lands first.
		if s.sure(app) {
			for _, h := range claimHosts {
				if cur, held := s.m.claims[h]; held && s.m.claims[host] != app && overlaps(host, h) && !s.m.unsureClaims[h] && s.sure(cur) && s.m.account[cur] != s.m.account[app] {
					s.fail("claim of %s by %s (tenant %s) answered %d while %s (tenant %s) holds %s", host, app, s.m.account[app], rec.Code, cur, s.m.account[cur], h)
				}
			}
		}
		s.m.claims[host] = app
		wasUnsure := s.m.unsureClaims[host]
		delete(s.m.unsureClaims, host)
		if wasUnsure {
			// Found: a claim stored by a write that answered 5xx (its bump failed) is
			// answered 200 by the next claim of it through another node ("already ours",
			// idempotent), which announces only that node's own pending writes: no bump
			// names the claim until the first writer's next heartbeat
			// (fleetwrite.Writer.AnnouncePending; before it, its next write), or a full
			// read (seed 187 at 200 seeds before this exception). Not fixed: the 200 comes
			// before the announcement (docs/design.md §5, one write domain).
			s.logf("claim %s answered %d while stored unannounced", host, rec.Code)
		} else if _, ok := s.m.apps[app]; ok && !s.m.unsureApps[app] {
			s.require(host, app)
		} else if !s.m.unsureApps[app] {
			// A claim answered 2xx after a delete of its application answered 200 (the
			// delete landed between the claim's read of the application and its write):
			// it would hold the host for scafo-unowned until the admin released it. The
			// claim withdraws itself instead (fleetwrite/claims.go, seed 88 before).
			s.fail("claim of %s for %s answered %d after its application's delete answered 200", host, app, rec.Code)
		}
		// A claim of an application whose last write answered 5xx is required of no
		// document: the claim's write checks the stored application, which the nodes may
		// not have been told of (until its writer's next bump names it, the host routes
		// to scafo-unowned).
	case rec.Code >= 500:
		s.m.unsureClaims[host] = true
	}
}
