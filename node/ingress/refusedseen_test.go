package ingress

import (
	"log/slog"
	"testing"
	"time"

	"github.com/traefik/paerser/types"

	"github.com/scafo/ingress/node/api"
	"github.com/scafo/ingress/node/store/dir"
)

// TestARefusalIsNotHearingFromTheIngress (hostile review 2, finding 7): a holder of the
// ingress token sending refused polls under a dead ingress's name keeps it neither seen
// nor "refused" past ingresses.lostAfter: it goes lost on time, and its listing keeps the
// reason of the polls refused since.
func TestARefusalIsNotHearingFromTheIngress(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	book := New(Options{Store: st, Log: slog.New(slog.DiscardHandler), Self: "vps-a",
		Config: Config{LostAfter: types.Duration(time.Minute), ForgetAfter: types.Duration(time.Hour), MaxTracked: 8},
		Known:  func() (uint64, string) { return 1, "" }, Current: func() (string, uint64) { return "", 1 }})
	book.Now = func() time.Time { return now }
	p, why := book.Begin(Report{Name: "edge-1", Kind: api.KindPlugin, Serial: 1})
	if p == nil {
		t.Fatal(why)
	}
	book.End(p, nil)
	state := func() (string, string) {
		t.Helper()
		for _, in := range book.Fleet(t.Context(), 0).Ingresses {
			if in.Name == "edge-1" {
				return in.State, in.Refused
			}
		}
		t.Fatal("edge-1 is not listed")
		return "", ""
	}
	now = now.Add(30 * time.Second)
	if !book.RefusePoll("edge-1", "the admin token on a poll") {
		t.Fatal("edge-1 is not tracked")
	}
	if st, why := state(); st != "refused" || why != "the admin token on a poll" {
		t.Fatalf("within lostAfter: %s (%q), want refused with the reason", st, why)
	}
	for range 10 { // refused polls every 10 s, past lostAfter
		now = now.Add(10 * time.Second)
		book.RefusePoll("edge-1", "the admin token on a poll")
	}
	if st, why := state(); st != "lost" || why != "the admin token on a poll" {
		t.Fatalf("past lostAfter with refused polls only: %s (%q), want lost with the reason", st, why)
	}
}
