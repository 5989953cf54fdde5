package ingress

import (
	"io"
	"log/slog"
	"testing"
)

func probeBook() *Book {
	return New(Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Self: "vps-a",
		Config:  Config{LostAfter: 1e9, ForgetAfter: 1e10, MaxTracked: 8},
		Known:   func() (uint64, string) { return 100, "" },
		Current: func() (string, uint64) { return "", 100 }})
}

func rev(c byte) string {
	b := make([]byte, 32)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// serve is one poll of an HTTP-provider Traefik with the probe, answered 200 with m.
func serve(t *testing.T, b *Book, name string, m Mark) {
	t.Helper()
	rep, err := ParseReport(ReportHeaders{Name: name, Probe: true})
	if err != nil || !rep.Probe {
		t.Fatalf("parse: %v, probe %v", err, rep.Probe)
	}
	p, why := b.Begin(rep)
	if why != "" {
		t.Fatal(why)
	}
	m.Probed = true
	b.End(p, &m)
}

func held(b *Book, name string) Report {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.local[name].rep
}

// TestAppliedCallbacksMoveOnlyForwardInServingOrder: a probe ingress holds nothing until
// a callback; a callback counts only for a revision served to it, and only forward in
// the order the bodies were served (a replay of an older one is ignored, a late callback
// of a body served before the last still counts forward); a revision served again at a
// later serial moves what it holds to that serial.
func TestAppliedCallbacksMoveOnlyForwardInServingOrder(t *testing.T) {
	b := probeBook()
	serve(t, b, "edge", Mark{Serial: 5, Revision: rev('a')})
	serve(t, b, "edge", Mark{Serial: 6, Revision: rev('b')})
	if r := held(b, "edge"); r.Serial != 0 || r.Revision != "" || !r.Probe {
		t.Fatalf("served twice, no callback: %+v, want nothing held", r)
	}
	if got := b.Applied("edge", rev('c')); got != AppliedUnknown {
		t.Fatalf("a revision never served: %v", got)
	}
	if got := b.Applied("other", rev('a')); got != AppliedUnknown {
		t.Fatalf("an ingress never served: %v", got)
	}
	if got := b.Applied("edge", rev('a')); got != AppliedRecorded {
		t.Fatalf("the older body's callback: %v, want recorded", got)
	}
	if r := held(b, "edge"); r.Serial != 5 || r.Revision != rev('a') {
		t.Fatalf("after a's callback: %+v", r)
	}
	if got := b.Applied("edge", rev('b')); got != AppliedRecorded {
		t.Fatalf("b's callback: %v", got)
	}
	if got := b.Applied("edge", rev('a')); got != AppliedAlready {
		t.Fatalf("a replayed: %v, want already", got)
	}
	if r := held(b, "edge"); r.Serial != 6 || r.Revision != rev('b') {
		t.Fatalf("after a replay: %+v, want b at 6", r)
	}
	// b served again at serial 9 (the same bytes): it holds b at 9 from its next poll.
	serve(t, b, "edge", Mark{Serial: 9, Revision: rev('b')})
	serve(t, b, "edge", Mark{Serial: 9, Revision: rev('b')})
	if r := held(b, "edge"); r.Serial != 9 || r.Revision != rev('b') {
		t.Fatalf("b at a later serial: %+v", r)
	}
	// A was served again after b (a flip back): its callback counts, the old one's
	// history entry does not go back.
	serve(t, b, "edge", Mark{Serial: 10, Revision: rev('a')})
	if got := b.Applied("edge", rev('a')); got != AppliedRecorded {
		t.Fatalf("a served again after b: %v, want recorded", got)
	}
	if got := b.Applied("edge", rev('b')); got != AppliedAlready {
		t.Fatalf("b after a was served again and applied: %v, want already", got)
	}
	if r := held(b, "edge"); r.Serial != 10 || r.Revision != rev('a') {
		t.Fatalf("%+v, want a at 10", r)
	}
}
