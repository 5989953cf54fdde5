package fleetsim

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
)

// The invariants of docs/design.md §15 the simulator checks, after every step against
// what each node serves, and at each settle point against the model.

var (
	seedFlag  = flag.Uint64("seed", 0, "run this seed alone, or -seeds from it (a failing seed prints it)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds (default: defaultSeeds, fewer under -short)")
	stepsFlag = flag.Int("steps", 0, "steps per seed (default: defaultSteps)")
	// Crashes may lose the node's state dir. Found with it (seed 3): a node restarted
	// without its state dir gave its ports again while peers still routed to them by its
	// last record (vps-c gave app3 the port app1 had; vps-a still routed app1's
	// api.example.net there). Fixed: the node holds the ports of its last record until a
	// record of its own is announced (fleetwrite/registry_lastrecord.go,
	// TestANewStateDirNeverReissuesAPortItsLastRecordPublishes). On by default.
	stateLostFlag = flag.Bool("statelost", true, "crashes may lose the node's state dir (see stateLostFlag)")
	// Nodes may crash while the store is restored and not yet adopted, and a restore need
	// not wait for every node to have passed since it started. Found with it (seeds 3, 9
	// and 27 of 60): served.json kept the serial a revision was first derived at, not the
	// last one served, so a node restarted over a store restored from a backup taken
	// between the two took it for its own and served an older state (vps-c served serial
	// 16, restarted, served serial 12, another revision). Fixed: the state dir keeps the
	// last serial served (reconcile/served.go, served-serial;
	// TestARestartRefusesAStoreRestoredFromBeforeTheLastServedSerial). On by default.
	// A node may restart without its state dir while the store is restored from a
	// backup and not yet adopted. Found with it (seed 68 of 100): the node reads the
	// backup's copy of its record for its last, so the ports it gave after the backup are
	// not held, and it gives them again while peers, which refuse the restored store,
	// keep routing to them by their last good document (vps-b gave app1 the port app3
	// had; vps-a still routed app3's host there). Not fixed: nothing the node can read
	// says what it published after the backup (the design's first start accepts the
	// store as it finds it, §6). Off: no state dir is lost while a restore waits for its
	// adopt, and no restore happens while a node that lost its state dir is down.
	lostRestoredFlag = flag.Bool("lostrestored", false, "a node may restart without its state dir over a restored store not yet adopted (see lostRestoredFlag)")
	restoreCrashFlag = flag.Bool("restorecrash", true, "nodes may crash while the store is restored and not yet adopted (see restoreCrashFlag)")
)

const (
	// defaultSeeds: what fits two minutes of the unit run, which runs two packages at a
	// time on two cores (about one core for this one). Under -race a seed of 200 steps
	// costs about 0.22 s of CPU, most of it the race detector's in the product's code
	// (the handler chain, reconcile's passes, a node's start). The default 480 seeds,
	// quiet (load average 1.2-1.5): 107 s of CPU, 54 s wall, about 900 steps per
	// CPU-second; at load average 9-13 the same seeds take about the same CPU and 185 s
	// wall. The 2 000 seeds would take about 3.7 minutes quiet, not its 2.
	defaultSeeds = 480
	defaultSteps = 200
	fleetNodes   = 3
	fleetIngress = 2
)

// TestFleet runs seeded schedules of a fleet of nodes under faults and checks the
// invariants after every step; a failure names the seed that replays it.
func TestFleet(t *testing.T) {
	seeds, steps := defaultSeeds, defaultSteps
	if testing.Short() {
		seeds = 8
	}
	if *seedsFlag > 0 {
		seeds = *seedsFlag
	}
	if *stepsFlag > 0 {
		steps = *stepsFlag
	}
	first := uint64(1)
	if *seedFlag != 0 { // one seed, or -seeds of them from it
		first = *seedFlag
		if *seedsFlag == 0 {
			seeds = 1
		}
	}
	if os.Getenv("GOGC") == "" {
		// The simulator allocates fast and keeps little (each seed's fleet is a few
		// megabytes), and under -race every collection also frees the detector's shadow
		// of what it swept: collecting at 4× the live heap instead of 2× saves a quarter
		// of the CPU (28 seeds, -race: 17.6 s → 13.4 s user+sys) for about 200 MB more.
		old := debug.SetGCPercent(400)
		t.Cleanup(func() { debug.SetGCPercent(old) })
	}
	start := time.Now()
	t.Cleanup(func() { t.Logf("%d seeds × %d steps in %v", seeds, steps, time.Since(start).Round(time.Millisecond)) })
	for seed := first; seed < first+uint64(seeds); seed++ {
		// Each seed is a fleet of its own: they run side by side (-parallel, GOMAXPROCS
		// by default), each on its one goroutine.
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			s := newSim(t, seed, fleetNodes, fleetIngress)
			s.run(steps)
			if *seedFlag != 0 && seeds == 1 && !s.failed {
				t.Logf("seed %d schedule:\n  %s\nmodel: hosts %v", seed, s.schedule(0), s.m.expectedHosts())
			}
		})
	}
}

// checkPoll checks one answer of n's routing endpoint:
//   - never an empty document: before n's first complete pass a 503, no document; from its
//     first 200 on, a document at every poll (a store outage serves the last one);
//   - the serial never goes back on a node, across its restarts;
//   - no write is lost: a document of a serial at or past a 2xx write's routes what it
//     wrote (until a delete of it is tried);
//   - no tenant is routed to another's instance: every upstream port of a route is
//     held, if by anyone, by the route's application.
func (s *sim) checkPoll(n *simNode, rec *recorder) {
	if rec.Code != http.StatusOK {
		if n.served200 || rec.Code != http.StatusServiceUnavailable {
			s.fail("%s answered a poll %d (%s) after serving a document", n.name, rec.Code, strings.TrimSpace(rec.Body.String()))
		}
		return
	}
	n.served200 = true
	serial, err := strconv.ParseUint(rec.Header().Get(api.HeaderSerial), 10, 64)
	epoch := rec.Header().Get(api.HeaderEpoch)
	if err != nil || epoch == "" && serial != 0 { // a new store has no epoch before its first bump
		s.fail("%s served a document with serial %q, epoch %q", n.name, rec.Header().Get(api.HeaderSerial), epoch)
		return
	}
	rev := rec.Header().Get(api.HeaderRevision)
	// Across restarts and an adopted restore too: a node advances an adopted store's
	// serial past the last it served (store.Identity.Advance).
	if epoch == n.lastEpoch && serial < n.lastSerial {
		s.fail("%s served serial %d (revision %s) after %d (revision %s)", n.name, serial, rev, n.lastSerial, n.lastRevision)
	}
	if epoch != n.lastEpoch || serial >= n.lastSerial {
		n.lastSerial, n.lastEpoch, n.lastRevision = serial, epoch, rev
	}
	d, err := s.docs.doc(rec.Body.Bytes())
	if err != nil || d.V != 1 || d.Revision == "" || d.Revision != rec.Header().Get(api.HeaderRevision) {
		s.fail("%s served a document that is not one (v %d, revision %q, header %q): %v", n.name, d.V, d.Revision, rec.Header().Get(api.HeaderRevision), err)
		return
	}
	s.checkRevision(n, d.Revision, rec.Body.Bytes())
	routed := make(map[string]string, len(d.Routes))
	for _, r := range d.Routes {
		routed[r.Host] = r.Application
	}
	for host, req := range s.m.required {
		if req.serial <= serial && routed[host] != req.app {
			s.fail("%s serves serial %d without %s → %s (written at serial %d)", n.name, serial, host, req.app, req.serial)
			return
		}
	}
	for _, r := range d.Routes {
		for _, u := range r.Upstreams {
			node, port, ok := s.nodeOfAddress(u.Address)
			if !ok {
				s.fail("%s routes %s to %s, no node's address", n.name, r.Host, u.Address)
				continue
			}
			if o, ok := s.m.orphan[portKey{node, port}]; ok && o.app == r.Application && serial >= o.serial {
				s.fail("%s routes %s (application %s) at serial %d to %s:%d, an instance of its incarnation that ended at serial %d",
					n.name, r.Host, r.Application, serial, node, port, o.serial)
			}
			if owner, held := s.m.owner[portKey{node, port}]; held && owner != r.Application {
				s.fail("%s routes %s (application %s, tenant %s) to %s:%d, held by %s (tenant %s)",
					n.name, r.Host, r.Application, s.m.account[r.Application], node, port, owner, s.m.account[owner])
			}
		}
	}
}

// checkRevision: the revision moves if and only if the routing content does (§15):
// every document served with one revision, by any node, is the same bytes, and two
// revisions never name the same content (the bytes without the revision).
func (s *sim) checkRevision(n *simNode, rev string, body []byte) {
	if seen, ok := s.revs[rev]; ok {
		if seen != string(body) {
			s.fail("%s serves revision %s with other content than it was served with:\n%s\n%s", n.name, rev, seen, body)
		}
		return
	}
	s.revs[rev] = string(body)
	content := string(bytes.Replace(body, []byte(rev), nil, 1))
	if other, ok := s.content[content]; ok {
		s.fail("%s serves revision %s for the content of revision %s:\n%s", n.name, rev, other, body)
		return
	}
	s.content[content] = rev
}

// checkConverged checks a settled fleet: every node serves the same bytes (and ETag),
// and the document is the model's: its hosts, and each application's upstreams.
func (s *sim) checkConverged() {
	var first *recorder
	var from string
	for _, n := range s.nodes {
		rec := s.do(n, http.MethodGet, api.PathIngress+api.FormatRoutes, ingressToken, nil, nil)
		s.checkPoll(n, rec)
		if rec.Code != http.StatusOK {
			s.fail("settled: %s answers %d", n.name, rec.Code)
			return
		}
		if first == nil {
			first, from = rec, n.name
			continue
		}
		if !bytes.Equal(rec.Body.Bytes(), first.Body.Bytes()) || rec.Header().Get("ETag") != first.Header().Get("ETag") {
			s.fail("settled: %s and %s serve different documents:\n%s\n%s", from, n.name, first.Body.String(), rec.Body.String())
			return
		}
	}
	// Byte stability of the render: one state renders to the same Traefik configuration
	// on every node (each node renders it on its own).
	var traefik []byte
	for _, n := range s.nodes {
		rec := s.do(n, http.MethodGet, api.PathIngress+api.FormatTraefik, ingressToken, nil, nil)
		if rec.Code != http.StatusOK {
			s.fail("settled: %s answers %d to a poll of its Traefik configuration: %s", n.name, rec.Code, rec.Body.String())
			return
		}
		if traefik == nil {
			traefik = rec.Body.Bytes()
		} else if !bytes.Equal(rec.Body.Bytes(), traefik) {
			s.fail("settled: %s and %s render different Traefik configurations:\n%s\n%s", from, n.name, traefik, rec.Body.String())
			return
		}
	}
	d, err := s.docs.doc(first.Body.Bytes())
	if err != nil {
		s.fail("settled: %v", err)
		return
	}
	if got, want := hostsOf(d), s.m.expectedHosts(); !slices.Equal(got, want) {
		s.fail("settled: routes %v, want %v", got, want)
		return
	}
	for _, r := range d.Routes {
		var got []string
		for _, u := range r.Upstreams {
			node, port, _ := s.nodeOfAddress(u.Address)
			got = append(got, node+":"+strconv.Itoa(port))
		}
		slices.Sort(got)
		if want := s.expectedUpstreams(r.Application); !slices.Equal(got, want) && r.Application != "scafo-unowned" || r.Application == "scafo-unowned" && len(got) > 0 {
			s.fail("settled: %s routes to %v, want %v", r.Host, got, want)
			return
		}
		s.checkPaths(d, r)
	}
}
