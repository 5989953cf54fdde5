package ingress

// ?wait=applied's rule (Book.Await) over the reports of a fleet: books over one
// directory store on a virtual clock (sharedreports_test.go's helpers). A wait that
// must not answer yet is asked with a deadline of a millisecond: what it answers then is
// what it would answer at any later instant with nothing else changed.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scafo/ingress/node/api"
)

// awaitNow is Await with a deadline already due: the answer the fleet's reports give now.
func awaitNow(t *testing.T, b *Book, c *fleetClock, serial uint64) api.Applied {
	t.Helper()
	c.Add(ViewMaxAge) // a view read earlier has aged: this one reads the store
	body, done := b.Await(t.Context(), serial, time.Millisecond)
	if !done {
		t.Fatal("Await ended with its context")
	}
	return body
}

func behindNames(body api.Applied) []string {
	var names []string
	for _, in := range body.Behind {
		names = append(names, in.Name)
	}
	return names
}

// A write answers "applied" only once every live ingress, whichever node it polls,
// reports its serial; until then it names the ingresses behind; an ingress lost
// (not heard from for lostAfter) is no longer waited for.
func TestWaitAppliedWaitsForEveryLiveIngress(t *testing.T) {
	st := dirStore(t)
	c, m := newFleetClock(), newFleetMark(1, rev('a'))
	a, b := nodeBook(st, "vps-a", c, m), nodeBook(st, "vps-b", c, m)
	ctx := t.Context()
	poll := func(n *Book, name string, serial uint64, revision string) {
		pluginPoll(t, n, name, serial, revision)
		n.Flush(ctx, c.Now())
	}
	poll(a, "edge-1", 1, rev('a'))
	poll(b, "edge-2", 1, rev('a'))
	if body := awaitNow(t, a, c, 1); !body.Applied || body.Ingresses != 2 || len(body.Behind) != 0 {
		t.Fatalf("serial 1, held by both: %+v, want applied by 2 ingresses", body)
	}

	m.set(2, rev('b')) // a write, taken and published by both nodes
	if body := awaitNow(t, a, c, 2); body.Applied || !slices.Equal(behindNames(body), []string{"edge-1", "edge-2"}) {
		t.Fatalf("serial 2, held by none: %+v, want both behind", body)
	}
	c.Add(MinWriteGap)
	poll(a, "edge-1", 2, rev('b'))
	body := awaitNow(t, a, c, 2)
	if body.Applied || !slices.Equal(behindNames(body), []string{"edge-2"}) || !strings.Contains(body.Detail, "edge-2") || body.Ingresses != 2 {
		t.Fatalf("serial 2, held by edge-1 alone: %+v, want edge-2 named behind", body)
	}
	if in := listed(t, b)["edge-2"]; in.State != "behind" || in.Behind != 1 {
		t.Errorf("status of edge-2 = %+v, want behind by 1", in)
	}

	// A wait under way answers once edge-2's report, written by vps-b, is read.
	answer := make(chan api.Applied, 1)
	go func() {
		body, _ := a.Await(ctx, 2, time.Minute)
		answer <- body
	}()
	c.Add(MinWriteGap)
	poll(b, "edge-2", 2, rev('b'))
	c.Add(ViewMaxAge) // the waiter's view ages: its next look reads the store
	select {
	case body = <-answer:
	case <-time.After(30 * time.Second): // a failure's bound, not a pace: it answers within ViewMaxAge/2
		t.Fatal("the wait did not answer once both ingresses held serial 2")
	}
	if !body.Applied || body.Ingresses != 2 || len(body.Behind) != 0 {
		t.Fatalf("serial 2, held by both: %+v, want applied by 2 ingresses", body)
	}

	// edge-2 stops polling: lost past lostAfter, and no longer waited for.
	for range int(lostAfterTest/MinWriteGap) + 1 {
		c.Add(MinWriteGap)
		poll(a, "edge-1", 2, rev('b'))
		b.Flush(ctx, c.Now())
	}
	m.set(3, rev('c'))
	poll(a, "edge-1", 3, rev('c'))
	if body := awaitNow(t, a, c, 3); !body.Applied || body.Ingresses != 1 {
		t.Errorf("serial 3 with edge-2 lost: %+v, want applied by edge-1 alone", body)
	}
	if in := listed(t, a)["edge-2"]; in.State != "lost" {
		t.Errorf("edge-2 after it stopped polling: %+v, want lost", in)
	}
}

// With no ingress at all, a write is "applied" once this node publishes it, and says
// that no ingress holds it; not before.
func TestWaitAppliedWithNoIngressAnswersOncePublished(t *testing.T) {
	c, m := newFleetClock(), newFleetMark(1, rev('a'))
	a := nodeBook(dirStore(t), "vps-a", c, m)
	m.known.Store(2) // written, not yet published by this node
	if body := awaitNow(t, a, c, 2); body.Applied || !strings.Contains(body.Detail, "not published it yet") {
		t.Errorf("serial 2 before this node publishes it: %+v, want not applied, saying so", body)
	}
	m.set(2, rev('b'))
	if body := awaitNow(t, a, c, 2); !body.Applied || !body.NoIngress || body.Ingresses != 0 || !strings.Contains(body.Detail, "no ingress") {
		t.Errorf("serial 2 published, no ingress: %+v, want applied, saying no ingress holds it", body)
	}
}

// An ingress polling ?group=eu-1 holds eu-1's content, with eu-1's revision; a write
// elsewhere moves the serial but not a byte of eu-1, so its long-poll stays parked and
// it keeps reporting the serial and the group revision it applied: that write is
// applied by it. A write in eu-1 is waited for until it reports the new serial.
func TestWaitAppliedCountsAGroupIngressOnItsGroupsContent(t *testing.T) {
	c, m := newFleetClock(), newFleetMark(5, rev('a'))
	m.groups.Store("eu-1", rev('e'))
	a := nodeBook(dirStore(t), "vps-a", c, m)
	p, why := a.Begin(Report{Name: "edge-eu", Kind: api.KindPlugin, Serial: 5, Revision: rev('e'), Groups: "eu-1"})
	if p == nil {
		t.Fatal(why)
	}
	defer a.End(p, nil) // one long-poll, parked throughout
	if in := listed(t, a)["edge-eu"]; in.State != "current" {
		t.Fatalf("edge-eu on eu-1's content: %+v, want current", in)
	}

	m.set(6, rev('b')) // a write in another group: eu-1's revision stays e
	if body := awaitNow(t, a, c, 6); !body.Applied || body.Ingresses != 1 {
		t.Errorf("a write outside eu-1: %+v, want applied (edge-eu serves eu-1, which did not change)", body)
	}
	m.groups.Store("eu-1", rev('f'))
	m.set(7, rev('c')) // a write in eu-1
	if body := awaitNow(t, a, c, 7); body.Applied || !slices.Equal(behindNames(body), []string{"edge-eu"}) {
		t.Errorf("a write in eu-1 edge-eu has not applied: %+v, want edge-eu behind", body)
	}
	p2, _ := a.Begin(Report{Name: "edge-eu", Kind: api.KindPlugin, Serial: 7, Revision: rev('f'), Groups: "eu-1"})
	a.End(p2, nil)
	if body := awaitNow(t, a, c, 7); !body.Applied {
		t.Errorf("a write in eu-1 edge-eu applied: %+v, want applied", body)
	}
}

// An HTTP-provider Traefik that declares its applied probe is behind for ?wait=applied
// however often it is served a write, until its callback for a body holding the write
// comes; a callback of an older body counts forward but does not hold a later write;
// the callback of the write's body answers a wait under way.
func TestAProbeIngressIsAppliedOnlyByItsCallback(t *testing.T) {
	c, m := newFleetClock(), newFleetMark(1, rev('a'))
	a := nodeBook(dirStore(t), "vps-a", c, m)
	probePoll := func(serial uint64, revision string) {
		t.Helper()
		rep, err := ParseReport(ReportHeaders{Name: "edge-p", Probe: true})
		if err != nil {
			t.Fatal(err)
		}
		p, why := a.Begin(rep)
		if p == nil {
			t.Fatal(why)
		}
		a.End(p, &Mark{Serial: serial, Revision: revision, Probed: true})
	}
	probePoll(1, rev('a'))
	probePoll(1, rev('a'))
	if in := listed(t, a)["edge-p"]; in.Kind != api.KindHTTP || in.Applied == nil || in.Applied.Serial != 0 || in.State != "behind" {
		t.Fatalf("served twice, no callback: %+v, want behind with nothing applied", in)
	}
	if got := a.Applied("edge-p", rev('a')); got != AppliedRecorded {
		t.Fatalf("the callback of the body served: %v, want recorded", got)
	}
	if body := awaitNow(t, a, c, 1); !body.Applied {
		t.Fatalf("serial 1 after its body's callback: %+v, want applied", body)
	}

	m.set(2, rev('b')) // a write; the ingress is served its body, again and again
	for range 3 {
		probePoll(2, rev('b'))
	}
	if body := awaitNow(t, a, c, 2); body.Applied || !slices.Equal(behindNames(body), []string{"edge-p"}) {
		t.Fatalf("serial 2 served, not called back: %+v, want edge-p behind", body)
	}
	m.set(3, rev('c')) // another write, served before Traefik applied the last
	probePoll(3, rev('c'))
	answer := make(chan api.Applied, 1)
	go func() {
		body, _ := a.Await(t.Context(), 3, time.Minute)
		answer <- body
	}()
	// Traefik applies b late: it counts forward, but does not hold serial 3.
	if got := a.Applied("edge-p", rev('b')); got != AppliedRecorded {
		t.Fatalf("the callback of the older body: %v, want recorded", got)
	}
	if body := awaitNow(t, a, c, 3); body.Applied {
		t.Fatalf("serial 3 on the callback of the older body: %+v, want edge-p behind", body)
	}
	select {
	case body := <-answer:
		t.Fatalf("the wait answered on the callback of an older body: %+v", body)
	default:
	}
	if got := a.Applied("edge-p", rev('c')); got != AppliedRecorded {
		t.Fatalf("the callback of the write's body: %v, want recorded", got)
	}
	select {
	case body := <-answer:
		if !body.Applied || body.Ingresses != 1 {
			t.Fatalf("the wait after the callback of its body: %+v, want applied", body)
		}
	case <-time.After(30 * time.Second): // a failure's bound, not a pace
		t.Fatal("the wait did not answer after the callback of its body")
	}
	// Replays of older callbacks never move it back:
	// TestAppliedCallbacksMoveOnlyForwardInServingOrder.
}
